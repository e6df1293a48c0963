"""Model sources ("suites"): where the models of a sweep come from.

  zoo      the built-in models (the embedded default)
  yaml     user models from a YAML file: ``name: module:factory`` plus per-model options
  command  an arbitrary command run under the chosen settings, judged by exit status and output
  commands several named commands from a YAML file (``name: command``), each one command check
  harness  PyTorch's own benchmarks/dynamo harness in a pytorch checkout
  csv      an accuracy CSV written by the harness (imported, not run)
  huggingface  transformers architectures built offline from tiny configs (extra: minify-action[models])
  timm     timm architectures, pretrained=False (extra: minify-action[models])

A *spec* is a small JSON-able dict that is enough to build (or re-run) one model; it is stored
in results.json so that later stages can re-run the exact check.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from bot.errors import UsageError

SOURCES = ("zoo", "yaml", "command", "commands", "harness", "csv", "huggingface", "timm")
COMMAND_OPTIONS = {"command", "cwd"}
YAML_OPTIONS = {"factory", "tolerance", "batch_size", "skip", "cosine", "description", "training_tolerance"}


@dataclass
class Model:
    """A model a source offers, before it is built."""

    name: str
    spec: dict
    description: str = ""
    batch_size: int | None = None
    skip: str | None = None  # reason, when the source says not to check it
    options: dict = field(default_factory=dict)


# --- zoo -------------------------------------------------------------------------------------------


def zoo_models() -> list[Model]:
    from bot.suites.zoo import MODELS

    return [
        Model(name, {"source": "zoo", "model": name}, desc, bs)
        for name, (_, bs, desc) in MODELS.items()
    ]


# --- yaml ------------------------------------------------------------------------------------------


def yaml_models(path: str) -> list[Model]:
    doc = _load_yaml(path, "model file")
    if isinstance(doc, dict) and "models" in doc:
        doc = doc["models"]
    if not isinstance(doc, dict) or not doc:
        raise UsageError(f"{path}: expected a mapping of model names to 'module:factory' (optionally under 'models:')")
    base = os.path.dirname(os.path.abspath(path))
    out = []
    for name, entry, where in _entries(doc, path, "model", "factory", YAML_OPTIONS, "'module:factory'"):
        factory = entry.get("factory")
        if not isinstance(factory, str) or factory.count(":") != 1 or not all(factory.split(":")):
            raise UsageError(f"{where}: 'factory' must be 'module:function', got {factory!r}")
        modname = factory.split(":")[0]
        if _find_module(modname, base) is None:
            raise UsageError(f"{where}: module {modname!r} not found (looked on sys.path and in {base})")
        for key in ("tolerance", "training_tolerance"):
            if key in entry and (isinstance(entry[key], bool) or not isinstance(entry[key], (int, float))
                                 or entry[key] <= 0):
                raise UsageError(f"{where}: '{key}' must be a positive number")
        bs = entry.get("batch_size")
        if bs is not None and (isinstance(bs, bool) or not isinstance(bs, int) or bs <= 0):
            raise UsageError(f"{where}: 'batch_size' must be a positive integer")
        if "cosine" in entry and not isinstance(entry["cosine"], bool):
            raise UsageError(f"{where}: 'cosine' must be true or false")
        skip = entry.get("skip")
        if skip is not None and not isinstance(skip, (bool, str)):
            raise UsageError(f"{where}: 'skip' must be true/false or a reason")
        skip_reason = (skip if isinstance(skip, str) else "skipped in the model file") if skip else None
        options = {k: entry[k] for k in ("tolerance", "training_tolerance", "cosine") if k in entry}
        spec = {"source": "yaml", "file": os.path.abspath(path), "model": name, "factory": factory, "options": options}
        if bs is not None:
            spec["batch_size"] = bs
        out.append(Model(name, spec, entry.get("description", ""), bs, skip_reason, options))
    return out


def _load_yaml(path: str, what: str):
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise UsageError(f"malformed YAML in {path}{where}: {problem}") from exc


def _valid_name(name) -> bool:
    return isinstance(name, str) and bool(name) and name.replace("_", "").replace("-", "").replace(".", "").isalnum()


def _entries(doc: dict, path: str, kind: str, key: str, options: set, short: str):
    """(name, entry, where) for each entry of a YAML mapping of names to ``short`` or to a mapping
    with ``key`` and some of ``options``; UsageError (exit 2) naming the file and the entry."""
    for name, entry in doc.items():
        if not _valid_name(name):
            raise UsageError(f"{path}: invalid {kind} name {name!r} (letters, digits, '_', '-', '.')")
        where = f"{path}: {kind} {name!r}"
        if isinstance(entry, str):
            entry = {key: entry}
        if not isinstance(entry, dict):
            raise UsageError(f"{where}: expected {short} or a mapping with a '{key}' key")
        unknown = set(entry) - options
        if unknown:
            raise UsageError(f"{where}: unknown option(s) {', '.join(sorted(map(str, unknown)))} "
                             f"(known: {', '.join(sorted(options))})")
        yield name, entry, where


def commands_models(path: str | None, patterns: dict | None = None) -> list[Model]:
    """Named commands from a YAML file, each one command check of the sweep::

        commands:                       # optional top-level key
          bert: python bench.py --model bert
          resnet:
            command: python bench.py --model resnet
            cwd: benchmarks             # relative to the file (default: the file's directory)
    """
    import shlex

    if not path:
        raise UsageError("--suite commands needs --command-file FILE (a YAML mapping of names to commands)")
    doc = _load_yaml(path, "command file")
    if isinstance(doc, dict) and set(doc) == {"commands"}:
        doc = doc["commands"]
    if not isinstance(doc, dict) or not doc:
        raise UsageError(f"{path}: expected a mapping of check names to commands (optionally under 'commands:')")
    base = os.path.dirname(os.path.abspath(path))
    out = []
    for name, entry, where in _entries(doc, path, "command", "command", COMMAND_OPTIONS, "a command string"):
        command = entry.get("command")
        if not isinstance(command, str) or not command.strip():
            raise UsageError(f"{where}: 'command' must be a non-empty string")
        try:
            shlex.split(command)
        except ValueError as exc:
            raise UsageError(f"{where}: cannot parse the command: {exc}") from None
        cwd = entry.get("cwd", ".")
        if not isinstance(cwd, str):
            raise UsageError(f"{where}: 'cwd' must be a directory path")
        cwd = os.path.normpath(os.path.join(base, cwd))
        if not os.path.isdir(cwd):
            raise UsageError(f"{where}: working directory {cwd} does not exist")
        spec = {"source": "command", "command": command, "model": name, "cwd": cwd}
        if patterns and (patterns.get("accuracy") or patterns.get("error")):
            spec["patterns"] = patterns
        out.append(Model(name, spec, command))
    return out


def _find_module(modname: str, base: str):
    added = base not in sys.path
    if added:
        sys.path.insert(0, base)
    try:
        return importlib.util.find_spec(modname)
    except (ImportError, ValueError):
        return None
    finally:
        if added:
            sys.path.remove(base)


# --- listing and selection -------------------------------------------------------------------------


def available(source: str, *, file: str | None = None, pytorch: str | None = None, suite: str | None = None,
              command: str | None = None, name: str | None = None, batch_size: int | None = None,
              patterns: dict | None = None, cwd: str | None = None, device: str | None = None) -> list[Model]:
    if source == "zoo":
        return zoo_models()
    if source == "yaml":
        if not file:
            raise UsageError("--suite yaml needs --model-file FILE")
        return yaml_models(file)
    if source == "command":
        if not command:
            raise UsageError("--suite command needs --command \"...\"")
        nm = name or "command"
        if not nm.replace("_", "").replace("-", "").replace(".", "").isalnum():
            raise UsageError(f"invalid --name {nm!r} (letters, digits, '_', '-', '.')")
        spec = {"source": "command", "command": command, "model": nm, "cwd": os.path.abspath(cwd or os.getcwd())}
        if patterns and (patterns.get("accuracy") or patterns.get("error")):
            spec["patterns"] = patterns
        return [Model(nm, spec, command)]
    if source == "commands":
        return commands_models(file, patterns)
    if source == "harness":
        from bot.suites.harness import harness_models

        return harness_models(pytorch, suite or "torchbench", batch_size=batch_size, patterns=patterns,
                              device=device)
    if source == "csv":
        from bot.suites.harness import csv_models

        return csv_models(file)
    if source == "huggingface":
        from bot.suites.huggingface import models, require_transformers

        require_transformers()
        return models()
    if source == "timm":
        from bot.suites.timm import models, require_timm

        require_timm()
        return models()
    raise UsageError(f"unknown model source {source!r}: expected one of {', '.join(SOURCES)}")


def select(models: list[Model], names: list[str] | None) -> list[Model]:
    if not names:
        return models
    by_name = {m.name: m for m in models}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        import difflib

        hints = []
        for n in unknown:
            close = difflib.get_close_matches(n, list(by_name), n=1)
            hints.append(f"{n!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise UsageError(f"unknown model{'s' if len(unknown) > 1 else ''} {', '.join(hints)}; "
                         "use --list to see what this source offers")
    seen, out = set(), []
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(by_name[n])
    return out


# --- building (runs inside the check's own process) ------------------------------------------------


def build(spec: dict, batch_size: int | None = None) -> tuple[Any, tuple, int]:
    """Build the model and example inputs for a spec. Returns (model, inputs, batch_size)."""
    src = spec.get("source")
    if src == "zoo":
        from bot.suites.zoo import MODELS

        if spec["model"] not in MODELS:
            raise UsageError(f"unknown zoo model {spec['model']!r}")
        factory, default_bs, _ = MODELS[spec["model"]]
        bs = batch_size or default_bs
        model, inputs = factory(bs)
        return model, tuple(inputs), bs
    if src == "yaml":
        base = os.path.dirname(spec["file"])
        if base not in sys.path:
            sys.path.insert(0, base)
        modname, fn = spec["factory"].split(":")
        factory = getattr(importlib.import_module(modname), fn)
        bs = batch_size or spec.get("batch_size")
        result = _call_factory(factory, bs)
        model, inputs = _unpack(result, spec["factory"])
        return model, inputs, bs or _guess_batch(inputs)
    if src == "huggingface":
        from bot.suites.huggingface import build_model

        return build_model(spec["model"], batch_size)
    if src == "timm":
        from bot.suites.timm import build_model

        return build_model(spec["model"], batch_size)
    raise UsageError(f"models from source {src!r} are not built in-process")


def _call_factory(factory, bs):
    import inspect

    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}
    if bs is not None and "batch_size" in params:
        return factory(batch_size=bs)
    return factory()


def _unpack(result, name):
    import torch

    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.nn.Module):
        model, inputs = result
    elif isinstance(result, dict) and "model" in result:
        model, inputs = result["model"], result.get("inputs", result.get("example_inputs"))
    else:
        raise TypeError(f"factory {name} must return (model, example_inputs), got {type(result).__name__}")
    if isinstance(inputs, torch.Tensor):
        inputs = (inputs,)
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"factory {name}: example inputs must be a tensor or a tuple of tensors")
    return model, tuple(inputs)


def _guess_batch(inputs):
    for x in inputs:
        if hasattr(x, "shape") and len(x.shape):
            return int(x.shape[0])
    return None

"""``--suite yaml``: user models from a YAML file, ``name: module:factory`` plus per-model options;
each model is built in the check's own process by calling its factory."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys

from bot.errors import UsageError
from bot.records import CheckRow, Spec
from bot.suites.source import ListRequest, Model, Reproduce, Source
from bot.suites.yaml_entries import load_entries

YAML_OPTIONS = {"factory", "tolerance", "batch_size", "skip", "cosine", "description", "training_tolerance"}
_SAFE_PATH = re.compile(r"[A-Za-z0-9_./+-]{1,400}")


class ModelFile(Source):
    name = "yaml"

    def models(self, req: ListRequest) -> list[Model]:
        if not req.file:
            raise UsageError("--suite yaml needs --model-file FILE")
        return yaml_models(req.file)

    def build(self, spec: Spec, batch_size: int | None):
        base = os.path.dirname(spec.file)
        if base not in sys.path:
            sys.path.insert(0, base)
        modname, fn = spec.factory.split(":")
        factory = getattr(importlib.import_module(modname), fn)
        bs = batch_size or spec.batch_size
        model, inputs = _unpack(_call_factory(factory, bs), spec.factory)
        return model, inputs, bs or _guess_batch(inputs)

    def reproduce(self, check: CheckRow, spec: Spec, models: list[str], trusted_commands=()) -> Reproduce:
        path = spec.file
        safe = isinstance(path, str) and _SAFE_PATH.fullmatch(path) and ".." not in path
        name = path.rsplit("/", 1)[-1] if safe else "MODELS.yaml"
        return Reproduce(args=["--suite", "yaml", "--model-file", name, *models])


SOURCE = ModelFile()


def yaml_models(path: str) -> list[Model]:
    base, entries = load_entries(path, what="model file", top="models", kind="model", key="factory",
                                 options=YAML_OPTIONS, short="'module:factory'", top_alone=False)
    out = []
    for name, entry, where in entries:
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
        spec = Spec(source="yaml", file=os.path.abspath(path), model=name, factory=factory, options=options,
                    batch_size=bs)
        out.append(Model(name, spec, entry.get("description", ""), bs, skip_reason, options))
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

"""Model sources ("suites"): where the models of a sweep come from.

  zoo      the built-in models (the embedded default)
  yaml     user models from a YAML file: ``name: module:factory`` plus per-model options
  command  an arbitrary command run under the chosen settings, judged by exit status and output
  commands several named commands from a YAML file (``name: command``), each one command check
  harness  PyTorch's own benchmarks/dynamo harness in a pytorch checkout
  csv      an accuracy CSV written by the harness (imported, not run)
  huggingface  transformers architectures built offline from tiny configs (extra: minify-action[models])
  timm     timm architectures, pretrained=False (extra: minify-action[models])
  fuzz     generated programs (bot/fuzz/), named by seed and index: --seed, --fuzz-count, --fuzz-time

A *spec* (:class:`bot.records.Spec`) is a small record that is enough to build (or re-run) one model; it is stored
in results.json so that later stages can re-run the exact check. Its ``source`` names the source
that answers for it (:func:`source_of`).

Each source is one module with one object implementing :class:`bot.suites.source.Source`, named in
:data:`REGISTRY` below (one line; the module is imported when the source is first asked).
"""

from __future__ import annotations

import importlib
from typing import Any

from bot.errors import UsageError
from bot.records import Spec
from bot.suites.source import ListRequest, Model, Source

__all__ = ["REGISTRY", "SOURCES", "ListRequest", "Model", "Source", "available", "build", "commands_models",
           "select", "source", "source_of", "zoo_models"]

# name -> "module:object"
REGISTRY = {
    "zoo": "bot.suites.builtin:SOURCE",
    "yaml": "bot.suites.model_file:SOURCE",
    "command": "bot.suites.command:COMMAND",
    "commands": "bot.suites.command:COMMANDS",
    "harness": "bot.suites.harness:HARNESS",
    "csv": "bot.suites.harness:CSV",
    "huggingface": "bot.suites.huggingface:SOURCE",
    "timm": "bot.suites.timm:SOURCE",
    "fuzz": "bot.suites.fuzz:SOURCE",
}
SOURCES = tuple(REGISTRY)


def source(name: str) -> Source:
    """The registered source called ``name``; UsageError (exit 2) for any other name."""
    where = REGISTRY.get(name) if isinstance(name, str) else None
    if where is None:
        raise UsageError(f"unknown model source {name!r}: expected one of {', '.join(REGISTRY)}")
    module, _, obj = where.partition(":")
    return getattr(importlib.import_module(module), obj)


def source_of(spec: Spec | None) -> Source:
    """The source a check's spec comes from (a spec without one: the zoo's)."""
    return source((spec.source if spec is not None else None) or "zoo")


def available(suite: str, /, **request: Any) -> list[Model]:
    """The models source ``suite`` offers, from what the command line says (:class:`ListRequest`)."""
    return source(suite).models(ListRequest(**request))


def build(spec: Spec, batch_size: int | None = None) -> tuple[Any, tuple, int]:
    """Build the model and example inputs for a spec, in the check's own process:
    (model, inputs, batch_size)."""
    return source_of(spec).build(spec, batch_size)


def zoo_models() -> list[Model]:
    return available("zoo")


def commands_models(path: str | None, patterns: dict | None = None) -> list[Model]:
    return available("commands", file=path, patterns=patterns)


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

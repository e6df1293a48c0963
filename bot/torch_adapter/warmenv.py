"""What a fresh interpreter would have done differently, done again in a program run warm.

:func:`fresh_start` reads torch's per-run settings from the run's environment again
(:func:`reread`) and seeds the random generators from the OS again (:func:`reseed`).

torch reads some environment variables once, when its config modules are imported. A program run
warm (:mod:`bot.suites.warm`) is forked from an interpreter that imported torch without them, so
the variables minify-bot sets per run - :data:`PER_RUN`, the repro-after capture's - are read here
again from the run's own environment, with the meaning torch gives them at import:

- ``TORCHDYNAMO_REPRO_AFTER`` and ``TORCHDYNAMO_REPRO_LEVEL``: plain defaults of the dynamo config;
- ``TORCH_COMPILE_DEBUG_DIR``: the debug directory's root, which without it is the *working
  directory's* ``torch_compile_debug`` (so it is computed again in every warm run, set or not);
- ``TORCHINDUCTOR_FX_GRAPH_CACHE`` and ``TORCHINDUCTOR_AUTOGRAD_CACHE``: *forcing* variables,
  which win over a program that turns the caches on in code.

Every other variable that torch could read at import is the same in the warm interpreter and the
run (the warm side keys its interpreters by the rest of the environment). Private config internals
are feature-detected; ``tests/test_suites_warm.py`` compares a warm run's whole config with a fresh
interpreter's on each torch it runs on.
"""

from __future__ import annotations

import os
import sys

from bot.torch_adapter.config import MODULES

PER_RUN = ("TORCHDYNAMO_REPRO_AFTER", "TORCHDYNAMO_REPRO_LEVEL", "TORCH_COMPILE_DEBUG_DIR",
           "TORCHINDUCTOR_FX_GRAPH_CACHE", "TORCHINDUCTOR_AUTOGRAD_CACHE")

# forcing variables: (config module, key, variable)
_FORCED = ((MODULES["inductor"], "fx_graph_cache", "TORCHINDUCTOR_FX_GRAPH_CACHE"),
           (MODULES["functorch"], "enable_autograd_cache", "TORCHINDUCTOR_AUTOGRAD_CACHE"))


def _env_value(raw: str):
    """A variable's value as torch's config module reads it ("1" True, "0" False, else the text)."""
    return {"1": True, "0": False}.get(raw, raw)


def _force(module_name: str, key: str, var: str) -> None:
    module = sys.modules.get(module_name)
    raw = os.environ.get(var)
    if module is None or raw is None:  # not imported yet: its import reads the variable itself
        return
    entry = getattr(module, "_config", {}).get(key)
    if entry is None or not hasattr(entry, "env_value_force"):  # no forcing value here: an override
        setattr(module, key, _env_value(raw))
        return
    entry.env_value_force = _env_value(raw)
    dirty = getattr(module, "_hash_dirty_var", None)  # what cached the config's hash and dict: stale now
    if dirty is not None and hasattr(dirty, "set"):
        dirty.set(True)
    mark = getattr(module, "_mark_get_dict_dirty", None)
    if callable(mark):
        mark(key)


def reread() -> None:
    """Set the settings of :data:`PER_RUN` from this process's environment, as importing torch's
    config modules with it would have."""
    dynamo = sys.modules.get(MODULES["dynamo"])
    if dynamo is not None:
        dynamo.repro_after = os.environ.get("TORCHDYNAMO_REPRO_AFTER", None)
        dynamo.repro_level = int(os.environ.get("TORCHDYNAMO_REPRO_LEVEL", 2))
        default_root = getattr(dynamo, "default_debug_dir_root", None)
        if callable(default_root):
            dynamo.debug_dir_root = default_root()
    for module_name, key, var in _FORCED:
        _force(module_name, key, var)


def reseed() -> None:
    """Seed torch's and numpy's global generators from the OS, as their import in a fresh
    interpreter does (Python's ``random`` does so itself after a fork): runs of a program that
    draws unseeded random numbers differ from each other warm as they do fresh."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.seed()
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed()


def fresh_start() -> None:
    """The start of a program run warm (:data:`bot.suites.warm.STARTUP`), before minify-bot's hook."""
    reread()
    reseed()

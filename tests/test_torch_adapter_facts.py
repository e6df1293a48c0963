"""bot/torch_adapter/facts.py: what this torch offers minify, as the script prints it in a fresh
interpreter (the way minify's fork server runs it): one JSON line."""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from bot.minify.procs import Interpreters
from bot.torch_adapter import facts


def test_the_facts_of_this_torch_as_minifys_fork_server_finds_them():
    """Run the way minify runs it: the script in a fork of a server that has imported torch.
    (Run directly as ``python facts.py`` it would not start: its directory, first on the path,
    holds bisect.py, which shadows the standard library's.)"""
    interpreters = Interpreters(preload=("torch",))
    try:
        out = interpreters.facts(timeout=120)
    finally:
        interpreters.close()
    assert out is not None
    assert out["torch"] == torch.__version__
    assert out["missing"] == []  # the dev pin has every private API the minifier uses
    assert out["hip"] == torch.version.hip
    if shutil.which("g++"):
        assert out["cxx"] and Path(out["cxx"]).name.endswith(("g++", "c++", "clang++"))


def test_a_missing_private_api_is_named(monkeypatch):
    monkeypatch.setattr(facts, "REPRO_API", facts.REPRO_API + (
        ("torch._dynamo.no_such_module", ("x",)), ("torch._dynamo.utils", ("same", "no_such_function"))))
    assert facts.missing_repro_api() == ["torch._dynamo.no_such_module", "torch._dynamo.utils.no_such_function"]

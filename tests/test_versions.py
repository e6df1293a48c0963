"""bot/torch_adapter/versions.py: the versions failure.json records, without importing torch to read them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
import torch

from bot.torch_adapter import versions

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent


def test_torch_build_read_without_importing_torch():
    code = ("import json, sys; from bot.torch_adapter import versions; b = versions.torch_build(); "
            "print(json.dumps({'build': b, 'imported': 'torch' in sys.modules}))")
    out = json.loads(subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                                    check=True, timeout=60).stdout)
    assert out["imported"] is False
    assert out["build"] == {"torch": torch.__version__, "torch_git": torch.version.git_version,
                            "cuda": torch.version.cuda}
    assert versions.torch_build()["torch"] == torch.__version__  # and from the imported module


@pytest.mark.skipif(not shutil.which("g++"), reason="no g++ on PATH")
def test_cxx_version_is_the_first_line_of_the_compilers_own_answer():
    first = subprocess.run(["g++", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    assert versions.cxx_version("g++") == first
    assert versions.cxx_version(None) is not None


def test_a_missing_compiler_is_none_not_an_error():
    assert versions.cxx_version("/nonexistent/bin/c++") is None


def test_collect_fills_every_field_and_uses_the_given_facts():
    info = versions.collect({"cxx": "g++", "triton": None, "hip": None})
    assert set(info) == {"torch", "torch_git", "cuda", "cudnn", "triton", "gpus", "driver", "python", "os", "cxx"}
    assert info["torch"] == torch.__version__
    assert info["python"] == ".".join(map(str, sys.version_info[:3]))
    if torch.version.cuda is None:
        assert info["cuda"] is None and info["gpus"] == [] and info["cudnn"] is None
    json.dumps(info)  # it goes into failure.json as is

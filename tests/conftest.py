"""Shared test setup.

Compiled artifacts are shared across the whole test session (and across sessions on the same
checkout) through one inductor cache directory, so only the first compile of each kernel pays
for g++. Stages that need a cold FX-graph cache (minify's capture) disable it themselves.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("MINIFY_ACTION_TEST_CACHE", ROOT / ".cache"))

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(CACHE / "inductor"))
os.environ.setdefault("PYTHONUNBUFFERED", "1")


def run_bot(*args, cwd=None, env=None, timeout=900, check=False) -> subprocess.CompletedProcess:
    """Run `python -m bot ...` as a real subprocess, the way a user or a workflow does."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), full_env.get("PYTHONPATH")]))
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "bot", *map(str, args)], cwd=cwd or ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode not in (0, 1):
        raise AssertionError(f"minify-bot {' '.join(map(str, args))} exited {proc.returncode}\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture(scope="session")
def bot():
    return run_bot

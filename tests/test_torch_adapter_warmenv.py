"""bot.torch_adapter.warmenv: in a process that imported torch without the per-run variables,
fresh_start() gives torch's config the values a fresh import with them would have (the forcing
cache switches win over a program that turns the caches on), and fresh random seeds. Real torch,
in subprocesses of their own; nothing compiles."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bot.torch_adapter.warmenv import PER_RUN

READ = """
import json, torch, torch._dynamo.config as dc, torch._inductor.config as ic, torch._functorch.config as fc
{before}
ic.fx_graph_cache = True          # a program that turns the caches on in code
fc.enable_autograd_cache = True
print(json.dumps([dc.repro_after, dc.repro_level, dc.debug_dir_root, ic.fx_graph_cache, fc.enable_autograd_cache,
                  torch.initial_seed()]))
"""

WARM = """
import os
os.environ.update(json.loads(os.environ.pop("LATER")))
from bot.torch_adapter import warmenv
warmenv.fresh_start()
"""


def _read(tmp_path, env_now: dict, later: dict | None = None) -> list:
    env = {k: v for k, v in os.environ.items() if k not in PER_RUN}
    env.update(env_now, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = READ.format(before=WARM if later is not None else "")
    if later is not None:
        env["LATER"] = json.dumps(later)
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_per_run_settings_read_again_are_what_a_fresh_import_reads(tmp_path):
    per_run = {"TORCHDYNAMO_REPRO_AFTER": "aot", "TORCHDYNAMO_REPRO_LEVEL": "4",
               "TORCH_COMPILE_DEBUG_DIR": str(tmp_path / "dbg"), "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
               "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}
    assert set(per_run) == set(PER_RUN)
    fresh = _read(tmp_path, per_run)
    warm = _read(tmp_path, {}, later=per_run)
    assert warm[:5] == fresh[:5] == ["aot", 4, str(tmp_path / "dbg" / "torch_compile_debug"), False, False]
    # without them: torch's defaults, the debug directory under the working directory
    assert _read(tmp_path, {}, later={})[:5] == _read(tmp_path, {})[:5] == \
        [None, 2, str(tmp_path / "torch_compile_debug"), True, True]


def test_each_warm_start_draws_fresh_seeds_for_torch_and_numpy():
    """Forked runs share their parent's generators; each fresh_start() seeds them anew."""
    code = """
import numpy, torch
from bot.torch_adapter import warmenv
seen = []
for _ in range(3):
    seen.append((torch.initial_seed(), int(numpy.random.get_state()[1][1])))
    warmenv.fresh_start()
print(len(set(s[0] for s in seen)), len(set(s[1] for s in seen)))
"""
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.split() == ["3", "3"]

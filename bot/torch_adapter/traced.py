"""Run a script with torch's structured trace on:  python traced.py TRACE_DIR SCRIPT [ARGS...]

The script runs as ``python SCRIPT ARGS...`` would (``__main__``, its own ``sys.argv``), writing
torch's structured trace (``TORCH_TRACE``) into TRACE_DIR, with the compiled-graph caches off so
that inductor generates (and logs) every module afresh.

Two ways in, one result:

- a fresh interpreter: the environment is set before torch is imported, which reads it;
- a process forked from an interpreter that imported torch already (the minify command's fork
  server, :class:`bot.minify.procs.Interpreters`): torch read its environment at import, so its
  trace handler and cache switches are set again here (private torch APIs, feature-detected;
  where they are missing, :func:`enable` says so and the caller runs a fresh interpreter).

This file imports nothing of minify-bot: the fork server runs it by path in an interpreter whose
scripts must not find minify-bot's modules (see :class:`bot.proc.ForkServer`).
"""

from __future__ import annotations

import os
import runpy
import sys

TRACE_VAR = "TORCH_TRACE"
# caches off: a cache hit skips code generation, so the trace would carry no generated code
NO_CACHES = {"TORCHINDUCTOR_FX_GRAPH_CACHE": "0", "TORCHINDUCTOR_AUTOGRAD_CACHE": "0"}
# exit code when torch is imported already and cannot be switched to tracing here
EXIT_CANNOT_TRACE_HERE = 97


def enable(trace_dir: str) -> bool:
    """Turn the trace on for the rest of this process: False when torch is imported already and
    this torch offers no way to turn it on after import."""
    os.environ[TRACE_VAR] = trace_dir
    os.environ.update(NO_CACHES)
    if "torch" not in sys.modules:
        return True
    try:
        import torch._functorch.config as functorch_config
        import torch._inductor.config as inductor_config
        import torch._logging._internal as logs
    except ImportError:
        return False
    needed = (hasattr(logs, "_init_logs") and hasattr(logs, "LOG_TRACE_HANDLER")
              and hasattr(inductor_config, "fx_graph_cache"))
    if not needed:
        return False
    inductor_config.fx_graph_cache = False
    if hasattr(functorch_config, "enable_autograd_cache"):
        functorch_config.enable_autograd_cache = False
    logs.LOG_TRACE_HANDLER = None   # made at import, without a directory: made again with this one
    logs._init_logs()
    return True


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python traced.py TRACE_DIR SCRIPT [ARGS...]", file=sys.stderr)
        return 2
    trace_dir, script = os.path.abspath(argv[0]), os.path.abspath(argv[1])
    if not enable(trace_dir):
        print("traced: this torch cannot turn its trace on after import", file=sys.stderr)
        return EXIT_CANNOT_TRACE_HERE
    sys.argv = [script, *argv[2:]]
    sys.path[0] = os.path.dirname(script)
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

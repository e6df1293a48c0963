"""The one place that touches torch's private API.

Everything under ``torch._dynamo``, ``torch._inductor``, ``torch._functorch`` and other
underscore modules is reached only through this package, feature-detected and gated by
torch version, so a torch upgrade changes this package and nothing else.

Submodules:
  config    --config overrides: parse, validate against the real config modules, apply, diff
  accuracy  the benchmark harness's accuracy judgement (same(), collect_results, losses)
  runtime   determinism, compile entry, exception classification, dynamo reset
  versions  torch/CUDA/triton/compiler version facts
  repro     repro-after capture and repro files (minify stage)
  minifier  the fx minifier driver (minify stage)
  fxutil    fx graph helpers the others share (input copies, size symbols, subgraph calls)
  bisect    CompilerBisector (minify stage)
  hook      inside a program minify-bot reruns: force the backend, count graphs, keep launchers
"""

from __future__ import annotations

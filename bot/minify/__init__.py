"""The minify stage: localize -> capture -> reduce -> verify -> package, one failure at a time.

The parent side (the ``minify``/``run`` command's process): pipeline (one failure end to end),
localize (stage ablation), capture (repro-after dump of the failing graph), reduce (runs the minify
worker with a budget, falls back to per-query isolation), verify (fresh-process reruns), package
(clean repro files), trace, reuse (known bugs), parallel, procs (its child processes). The worker
side is the package ``worker`` (the process that imports torch and minifies: its reduction, how a
candidate is judged, the readout, the config diff, the plain and short repro writers), which
imports nothing of the parent side but the typed records both share (``records``). Only
bot.torch_adapter touches torch's private API.
"""

"""The minify stage: localize -> capture -> reduce -> verify -> package, one failure at a time.

Modules: localize (stage ablation), capture (repro-after dump of the failing graph), reduce (runs
the minify worker with a budget, falls back to per-query isolation), worker (the process that
imports torch and minifies), predicate (pinned failure signatures), verify (fresh-process reruns),
package (clean repro files), configdiff (true and minimal config diffs), pipeline (one failure end
to end). Only bot.torch_adapter touches torch's private API.
"""

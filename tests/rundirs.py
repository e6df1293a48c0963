"""Small run directories written through the product's own writers: results.json by the check
stage's ResultsWriter, each failures/<id>/failure.json from a FailureRecord by bot.rundir. For tests
of what reads a run directory (the report's load, state and context). No torch involved."""

from __future__ import annotations

from pathlib import Path

from bot import rundir
from bot.check.results import ResultsWriter
from bot.check.settings import Settings, check_id
from bot.failure import FailureRecord
from bot.records import Capture, CheckRow, ConfigDiff, Culprit, GraphOp, Repro, RunSettings, Verification

REPRO = "import torch\n\nclass Repro(torch.nn.Module):\n    def forward(self, x):\n        return (x.relu(),)\n"
VERSIONS = {"torch": "2.13.0+cpu", "torch_git": "0123abc", "python": "3.11.7", "os": "Linux", "cuda": None}


def check(model: str = "mlp_relu", *, status: str = "fail_accuracy", failure_class: str | None = "accuracy",
          settings: Settings | None = None, spec: dict | None = None, error: dict | None = None, **extra) -> CheckRow:
    """A results.json row, as the sweep makes one for ``model`` under ``settings`` (``spec``, ``error``
    and ``extra`` as their JSON)."""
    s = settings or Settings()
    row = {"id": check_id(model, s), "model": model, "spec": spec or {"source": "zoo", "model": model},
           "backend": s.backend, "mode": s.mode, "dtype": s.dtype, "device": s.device, "dynamic": s.dynamic,
           "config": dict(s.config), "status": status, "failure_class": failure_class, "error": error,
           "accuracy": ({"tolerance": 1e-4, "cosine": False, "rmse_res": 0.25, "rmse_ref": 1e-8, "max_abs_diff": 0.9}
                        if failure_class == "accuracy" else None),
           "batch_size": 4, "duration_s": 1.5, "log": f"checks/{check_id(model, s)}.log"}
    row.update(extra)
    return CheckRow.from_json(row)


def failure(row: CheckRow, *, ops=("aten.relu.default",), culprit: Culprit | None = None, torch: str = "2.13.0+cpu",
            diff: list | None = None, minimal: list | None = None, status: str = "minimized", flaky: bool = False,
            stage: str = "inductor", **fields) -> FailureRecord:
    """The failure record minify writes for ``row``: FailureRecord.for_check, then each step's part."""
    rec = FailureRecord.for_check(row)
    graph = [GraphOp(op, ["float32"], [2]) for op in ops]
    verified = status in ("minimized", "partial")
    rec = rec.replace(
        stage=stage, culprit=culprit, flaky=flaky, versions={**VERSIONS, "torch": torch},
        repro=Repro(status=status, path=rundir.REPRO if verified else None, inputs_dir=None, nodes_before=40,
                    nodes_after=len(graph), queries=9, seconds=3.0, graph=graph if verified else None,
                    verification=Verification(runs=3, failed_same_way=3, random_inputs_reproduce=True)
                    if verified else None,
                    capture=Capture(repro_after="aot", repro_level=4, method="torch")),
        config=ConfigDiff(diff=list(diff or []), minimal=minimal), **fields)
    return rec


def write(run_dir, rows: list[CheckRow], records: list[FailureRecord] = (), *, repro_text: str | None = REPRO,
          settings: Settings | None = None) -> Path:
    """results.json with ``rows`` and one failure directory per record (with its repro.py)."""
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    w = ResultsWriter(str(run), RunSettings.from_json((settings or Settings()).to_dict()).replace(source="zoo"),
                      dict(VERSIONS))
    for row in rows:
        w.add(row)
    w.finish()
    for rec in records:
        d = rundir.failure_dir(run, rec.id)
        d.mkdir(parents=True, exist_ok=True)
        rundir.write_failure(d, rec)
        if repro_text is not None and rec.repro.path:
            (d / rec.repro.path).write_text(repro_text)
    return run

"""Hand-written run directories (results.json + failures/*/failure.json, per docs/run-directory.md)
for reporting tests. Data fixtures only: no torch involved."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from bot.failure import FailureRecord
from bot.records import CheckRow, ReportDoc

REPRO = '''import torch
from torch import tensor, device
import torch.fx as fx
import torch._inductor.config
torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'

class Repro(torch.nn.Module):
    def forward(self, arg0_1):
        relu = torch.ops.aten.relu.default(arg0_1);  arg0_1 = None
        return (relu,)

def load_args(reader):
    buf0 = reader.storage(None, 128)
    reader.tensor(buf0, (4, 8), is_leaf=True)  # arg0_1
load_args._version = 0
mod = Repro()
if __name__ == "__main__":
    from torch._dynamo.repro.after_aot import run_repro
    with torch.no_grad():
        run_repro(mod, load_args, accuracy='accuracy', command='run', save_dir=None, tracing_mode='real',
                  check_str=None)
'''


def check_row(model="mlp_relu", status="fail_accuracy", failure_class="accuracy", baseline="new",
              backend="inductor", mode="inference", dtype="float32", device="cpu", config=None, error=None):
    cid = f"{model}-{backend}-{mode}-{dtype}-{device}"
    return {
        "id": cid, "model": model, "spec": {"source": "zoo", "model": model},
        "backend": backend, "mode": mode, "dtype": dtype, "device": device, "dynamic": False,
        "config": config if config is not None else {"inductor.cpp.inject_relu_bug_TESTING_ONLY": "accuracy"},
        "status": status, "failure_class": failure_class, "error": error,
        "accuracy": ({"tolerance": 0.0001, "cosine": False, "rmse_res": 0.22, "rmse_ref": 1e-8, "max_abs_diff": 0.9}
                     if failure_class == "accuracy" else None),
        "batch_size": 4, "duration_s": 1.9, "baseline": baseline if failure_class else None,
        "log": f"checks/{cid}.log",
    }


def row_of(check: dict) -> CheckRow:
    """A check row written as its results.json JSON, as the product reads it."""
    return CheckRow.from_json(check)


def record_of(failure: dict) -> FailureRecord:
    """A failure record written as its failure.json JSON, as the product reads it."""
    return FailureRecord.from_json(failure)


def report_of(doc: dict) -> ReportDoc:
    """report.json's document (its run and tracker filled in when left out), as the Action reads it."""
    return ReportDoc.from_json({"run_id": "run-1", "tracker": "local", **doc})


def failure_record(check: dict, *, graph=None, flaky=False, error=None, torch="2.13.0+cpu", nodes_after=None,
                   stage="inductor", repro_status="minimized"):
    graph = graph if graph is not None else [{"op": "aten.relu.default", "dtypes": ["float32"], "ranks": [2]}]
    cls = check["failure_class"]
    return {
        "schema": "minify-action/failure/v1", "id": check["id"], "check": copy.deepcopy(check),
        "class": cls, "stage": stage,
        "ablation": [{"backend": "eager", "status": "pass"}, {"backend": "aot_eager", "status": "pass"},
                     {"backend": "aot_eager_decomp_partition", "status": "pass"},
                     {"backend": "inductor", "status": check["status"]}],
        "bisect": None, "error": error,
        "accuracy": {"tolerance": 0.0001, "rmse_res": 0.22, "rmse_ref": 1e-8} if cls == "accuracy" else None,
        "repro": {"status": repro_status, "reason": None, "path": "repro.py", "standalone_path": None,
                  "inputs_dir": "inputs", "log": "minifier.log", "nodes_before": 152,
                  "nodes_after": nodes_after if nodes_after is not None else len(graph), "queries": 17, "seconds": 4.1,
                  "graph": graph, "verification": {"runs": 3, "failed_same_way": 3, "random_inputs_reproduce": True},
                  "capture": {"repro_after": "aot", "repro_level": 4, "method": "torch", "note": None}},
        "config": {"diff": [{"key": "inductor.cpp.inject_relu_bug_TESTING_ONLY", "default": None,
                             "value": "accuracy"}],
                   "minimal": [{"key": "inductor.cpp.inject_relu_bug_TESTING_ONLY", "default": None,
                                "value": "accuracy"}]},
        "versions": {"torch": torch, "torch_git": "abc123", "cuda": None, "cudnn": None, "triton": None, "gpus": [],
                     "driver": None, "python": "3.11.7", "os": "Linux", "cxx": "g++ 12.2.0"},
        "flaky": flaky,
    }


def write_run(run_dir, checks: list[dict], failures: dict[str, dict] | None = None, started="2026-11-22T03:00:00Z",
              repro_text: str = REPRO) -> Path:
    """Write results.json and failures/<id>/{failure.json,repro.py}. ``failures`` maps check id ->
    failure record (omit a failing check's id to simulate "no failure.json")."""
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    results = {
        "schema": "minify-action/results/v1", "tool_version": "0.1.0", "started": started, "finished": started,
        "complete": True,
        "settings": {"source": "zoo", "backend": "inductor", "mode": "inference", "dtype": "float32", "device": "cpu",
                     "dynamic": False, "config": {}, "timeout": 600, "shard": "1/1", "baseline": None},
        "versions": {"torch": "2.13.0+cpu", "torch_git": "abc123", "python": "3.11.7", "os": "Linux", "cuda": None},
        "checks": checks,
    }
    (run / "results.json").write_text(json.dumps(results, indent=1))
    for cid, rec in (failures or {}).items():
        d = run / "failures" / cid
        d.mkdir(parents=True, exist_ok=True)
        (d / "failure.json").write_text(json.dumps(rec, indent=1))
        if repro_text is not None:
            (d / "repro.py").write_text(repro_text)
    return run


def failing_run(run_dir, model="mlp_relu", started="2026-11-22T03:00:00Z", **failure_kwargs) -> Path:
    """One model failing accuracy with a minimized relu graph (the injected relu bug)."""
    c = check_row(model)
    return write_run(run_dir, [c], {c["id"]: failure_record(c, **failure_kwargs)}, started=started)


def passing_run(run_dir, model="mlp_relu", started="2026-11-23T03:00:00Z") -> Path:
    c = check_row(model, status="pass", failure_class=None)
    return write_run(run_dir, [c], {}, started=started)

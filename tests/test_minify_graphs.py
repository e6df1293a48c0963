"""minify on training and dynamic-shape failures (real checks, real compiles), and the reduction
passes on a real captured graph: culprit search in about log2(N) queries, 1-minimal result."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY"
DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def workdir(workdir):
    """The shared scratch directory, with the graph models' YAML factory in it."""
    (workdir / "models.yaml").write_text("backward_relu: graph_models:backward_relu\nseq_mlp: graph_models:seq_mlp\n")
    shutil.copy(DATA / "graph_models.py", workdir / "graph_models.py")
    return workdir


def _check_and_minify(bot, workdir, name, *flags):
    run = workdir / name
    p = bot("check", "--suite", "yaml", "--model-file", workdir / "models.yaml", "--models", name, "--out", run,
            "--timeout", "300", "--config", f"{RELU}=accuracy", "--reruns", "0", *flags)
    row = json.loads((run / "results.json").read_text())["checks"][0]
    assert row["failure_class"] == "accuracy", (row["status"], row.get("error"), p.stderr[-3000:])
    p = bot("minify", "--out", run, "--budget", "300", "--no-bisect")
    assert p.returncode == 1, p.stderr[-3000:]
    return row, json.loads((run / "failures" / row["id"] / "failure.json").read_text()), p.stderr


def test_a_bug_only_in_the_backward_graph_is_minimized_there_and_the_record_says_so(bot, workdir):
    row, rec, stderr = _check_and_minify(bot, workdir, "backward_relu", "--mode", "training")
    r = rec["repro"]
    assert r["status"] == "minimized", (r["reason"], stderr[-3000:])
    assert r["capture"]["role"] == "backward"
    assert [g["op"] for g in r["graph"]] == ["aten.relu.default"]
    assert rec["culprit"] == {"ops": ["aten.relu.default"], "method": "compiled-alone", "bisect": None}
    assert r["verification"]["failed_same_way"] == 3


def test_a_dynamic_shapes_failure_is_minimized(bot, workdir):
    row, rec, stderr = _check_and_minify(bot, workdir, "seq_mlp", "--dynamic")
    r = rec["repro"]
    assert row["dynamic"] is True
    assert r["status"] == "minimized", (r["reason"], stderr[-3000:])
    assert [g["op"] for g in r["graph"]] == ["aten.relu.default"]
    assert r["verification"]["failed_same_way"] == 3
    # static first: the injected relu fails with the captured sizes too, so the repro is static, and the
    # record says it was captured dynamic (a bug that needs symbolic sizes stays dynamic: test_passes.py)
    assert r["capture"]["dynamic"] is False and "captured with dynamic shapes" in r["capture"]["note"]
    src = (workdir / "seq_mlp" / "failures" / row["id"] / "repro.py").read_text()
    assert "tracing_mode='real'" in src and "reader.symint(" not in src

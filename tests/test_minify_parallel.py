"""bot.minify.parallel: several failures minimized at once, each in a `minify --only ID` process of
its own (the same options), with the same records and summary as one at a time."""

from __future__ import annotations

import json

import pytest

from bot.minify import parallel
from tests import rundirs


def _rows(*devices: str):
    return [rundirs.check(m).replace(device=d) for m, d in zip(("mlp_relu", "resblock", "conv_bn", "gru"), devices)]


def test_how_many_at_once(monkeypatch):
    """One failure: one. Asked: at most one per failure. CPU failures: one per 4 cores. A failure
    that ran on CUDA: one per visible GPU (none visible: one)."""
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 16)
    assert parallel.jobs_for(_rows("cpu"), None) == 1
    assert parallel.jobs_for(_rows("cpu", "cpu"), 8) == 2
    assert parallel.jobs_for(_rows("cpu", "cpu", "cpu", "cpu"), None) == 4
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    assert parallel.jobs_for(_rows("cpu", "cpu", "cpu"), None) == 1
    monkeypatch.setattr(parallel, "_gpus", lambda: ["0", "1"])
    assert parallel.jobs_for(_rows("cuda", "cpu", "cuda"), None) == 2
    monkeypatch.setattr(parallel, "_gpus", lambda: [])
    assert parallel.jobs_for(_rows("cuda", "cuda"), None) == 1


@pytest.mark.slow
def test_two_failures_at_once_end_like_one_at_a_time(workdir, bot):
    """Two zoo models under the injected relu bug, minified with --jobs 2: each ends with a verified
    repro of relu, its own log, and the command's output says which failure each line is about."""
    run = workdir / "run"
    p = bot("check", "--out", run, "--models", "mlp_relu,resblock", "--config",
            "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy", "--reruns", "0")
    assert p.returncode == 1, p.stderr[-3000:]
    ids = [r["id"] for r in json.loads((run / "results.json").read_text())["checks"]]
    p = bot("minify", "--out", run, "--jobs", "2", "--no-bisect", "--verify-runs", "2", "--budget", "240")
    assert p.returncode == 1, p.stderr[-4000:]
    assert "2 failures, 2 at a time" in p.stderr
    for cid in ids:
        rec = json.loads((run / "failures" / cid / "failure.json").read_text())
        assert rec["repro"]["status"] == "minimized" and rec["repro"]["verification"]["failed_same_way"] == 2
        assert [op["op"] for op in rec["repro"]["graph"]] == ["aten.relu.default"]
        assert "verified" in (run / "checks" / f"{cid}.minify.log").read_text()
        assert f"[{cid}] " in p.stderr
    assert "done: 2/2 failures minimized and verified" in p.stderr

"""bot/minify/reduce.py: the worker's smallest checkpoint is what survives a worker that dies. The
fast tests need no worker: which checkpoint counts, and what a worker that left no result.json
yields. The slow tests run the real worker on a real captured graph (mm -> relu -> add under
inductor's injected relu accuracy bug) and kill it on the way: once an isolated worker (the
SIGKILL an out-of-memory kill would send), once the in-process worker by the fault injection that
makes it die in the bisector (the worker's MINIFY_BOT_WORKER_CRASH_IN_BISECT)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from bot import proc
from bot.minify import reduce as red
from bot.minify.records import Checkpoint, Loaded, MinifyJob, Query
from bot.minify.worker.main import BISECT_CRASH_ENV, CHECKPOINT_KILL_ENV
from bot.minify.worker.predicate import CRASH_HOOK_ENV

RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY"


def _job(workdir: Path, **kw) -> MinifyJob:
    """A job as reduce runs it: its deadline set when its worker started."""
    return MinifyJob(**{"repro": str(workdir / "launcher.py"), "workdir": str(workdir), "failure_class": "accuracy",
                        "budget": 300.0, "deadline": time.time() + 300.0, **kw})


def _checkpoints(workdir: Path, *names: str) -> None:
    (workdir / "checkpoints").mkdir(parents=True, exist_ok=True)
    for name in names:
        (workdir / "checkpoints" / name).write_text("# a checkpoint\n")


# ---------------------------------------------------------------------------- fast: no worker


def test_the_latest_checkpoint_is_the_smallest_graph_written(tmp_path):
    _checkpoints(tmp_path, "120.py", "9.py", "40.py")
    assert red.latest_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoints" / "9.py")


def test_half_written_and_foreign_files_are_not_checkpoints(tmp_path):
    _checkpoints(tmp_path, "40.py", "7.py.tmp", "final.py", "3.txt", "x7.py")
    assert red.latest_checkpoint(str(tmp_path)) == str(tmp_path / "checkpoints" / "40.py")


def test_no_checkpoint_when_the_worker_wrote_none(tmp_path):
    assert red.latest_checkpoint(str(tmp_path)) is None
    _checkpoints(tmp_path, "7.py.tmp")
    assert red.latest_checkpoint(str(tmp_path)) is None


def _died(rc: int, tail: str, events=(), timed_out=False) -> proc.Result:
    return proc.Result(rc, 12.0, events=[e.to_json() for e in events], tail=tail, timed_out=timed_out)


def test_a_worker_that_died_after_checkpoints_leaves_a_partial_result_at_the_smallest(tmp_path):
    _checkpoints(tmp_path, "30.py", "12.py")
    events = [Loaded(48, "aot"), Query(1, 48, True), Checkpoint(30), Query(2, 30, True), Checkpoint(12),
              Query(3, 12, False)]
    res = red._without_result(_died(-9, "query 3\nKilled", events), _job(tmp_path))
    assert (res.status, res.nodes_before, res.nodes_after, res.queries) == ("partial", 48, 12, 3)
    assert res.final == str(tmp_path / "checkpoints" / "12.py")
    assert res.reason == "the minify worker failed (exit -9): Killed; kept the smallest checkpoint"


def test_a_worker_that_died_before_any_checkpoint_leaves_no_repro_and_says_why(tmp_path):
    res = red._without_result(_died(70, "loading the graph\nSegmentation fault"), _job(tmp_path))
    assert (res.status, res.final) == ("none", None)
    assert res.reason == "the minify worker failed (exit 70): Segmentation fault"


def test_a_worker_stopped_at_its_time_limit_says_the_budget_ran_out(tmp_path):
    _checkpoints(tmp_path, "5.py")
    res = red._without_result(_died(None, "", timed_out=True), _job(tmp_path, budget=45.0))
    assert res.status == "partial"
    assert res.reason == "time budget of 45.0 s ran out; kept the smallest checkpoint"


def test_a_resumed_worker_that_dies_too_keeps_the_size_of_the_graph_first_loaded(tmp_path):
    _checkpoints(tmp_path, "12.py", "5.py")
    resumed = _job(tmp_path, repro=str(tmp_path / "checkpoints" / "12.py"), isolate=True, nodes_before=48)
    res = red._without_result(_died(-9, "Killed", [Loaded(12, "aot"), Checkpoint(5)]), resumed)
    assert (res.nodes_before, res.nodes_after) == (48, 5)


# ---------------------------------------------------------------------------- slow: the real worker


@pytest.fixture(scope="module")
def launcher(workdir) -> Path:
    """A torch-format launcher as capture writes it: the graph mm -> relu -> add (6 nodes), its
    inputs saved beside it, the injected bug's setting among its config lines."""
    import torch
    import torch._inductor.config as inductor_config
    from torch.fx.experimental.proxy_tensor import make_fx

    from bot.torch_adapter import repro as R

    torch.manual_seed(0)
    x, w = torch.randn(8, 16), torch.randn(16, 16)
    gm = make_fx(lambda x, w: (torch.relu(x @ w) + 1,))(x, w)
    with inductor_config.patch({"cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}):
        src = R.repro_source(gm, [x, w], kind="aot", accuracy="accuracy", save_dir=str(workdir / "saved"),
                             command="minify")
    path = workdir / "launcher.py"
    path.write_text(src)
    assert len(gm.graph.nodes) == 6
    return path


@pytest.mark.slow
def test_an_isolated_worker_killed_after_its_checkpoint_leaves_that_graph_as_a_partial_repro(launcher, workdir,
                                                                                            monkeypatch):
    # killed by itself right after the checkpoint: killed from here on the event, a warm worker could
    # finish first (it takes about a second)
    monkeypatch.setenv(CHECKPOINT_KILL_ENV, "1")
    wd = workdir / "killed"
    job = MinifyJob(str(launcher), str(wd), "accuracy", 300.0, isolate=True, check_config={RELU: "accuracy"},
                    bisect=False)
    events: list = []
    res = red.reduce(job, str(workdir / "killed.log"), on_event=events.append)
    assert [e.nodes for e in events if isinstance(e, Checkpoint)] == [3], (workdir / "killed.log").read_text()[-3000:]
    assert res.status == "partial", res
    assert res.final == str(wd / "checkpoints" / "3.py") and os.path.exists(res.final)
    assert (res.nodes_before, res.nodes_after) == (6, 3)   # placeholder -> relu -> output
    assert "aten.relu.default" in Path(res.final).read_text()
    assert res.reason.startswith("the minify worker failed (exit -9)")
    assert res.reason.endswith("kept the smallest checkpoint")
    assert res.isolated and res.note is None                  # an isolated worker is not resumed
    assert res.signature is not None and res.signature.failure_class == "accuracy"   # as its sanity step pinned it


@pytest.mark.slow
def test_an_in_process_worker_that_dies_resumes_isolated_from_its_smallest_checkpoint(launcher, workdir,
                                                                                        monkeypatch):
    monkeypatch.setenv(BISECT_CRASH_ENV, "1")   # dies when its bisector starts, after its final repro
    wd = workdir / "resumed"
    job = MinifyJob(str(launcher), str(wd), "accuracy", 300.0, check_config={RELU: "accuracy"}, bisect=True)
    events: list = []
    res = red.reduce(job, str(workdir / "resumed.log"), on_event=events.append)
    log = (workdir / "resumed.log").read_text()
    assert res.status == "minimized", log[-3000:]
    assert res.isolated
    assert res.note == ("the in-process minify worker died (exit 70); resumed from the 3-node checkpoint with "
                        "one process per query")
    assert (res.nodes_before, res.nodes_after) == (6, 3)     # the size the first worker loaded
    assert res.final == str(wd / "final" / "repro.py") and os.path.exists(res.final)
    assert res.culprit is not None and res.culprit.ops == ["aten.relu.default"]
    assert [d.key for d in res.config_minimal] == [RELU]
    assert [e.nodes for e in events if isinstance(e, Loaded)] == [6, 3]   # the first worker, the resumed one
    assert any(isinstance(e, Query) and e.isolated for e in events)


@pytest.mark.slow
def test_a_worker_that_dies_before_any_checkpoint_resumes_isolated_from_the_launcher(launcher, workdir, monkeypatch):
    monkeypatch.setenv(CRASH_HOOK_ENV, "0")   # the in-process worker dies on its first query
    wd = workdir / "first-query"
    job = MinifyJob(str(launcher), str(wd), "accuracy", 300.0, check_config={RELU: "accuracy"}, bisect=False)
    res = red.reduce(job, str(workdir / "first-query.log"), on_event=None)
    assert res.status == "minimized", (workdir / "first-query.log").read_text()[-3000:]
    assert res.note == "the in-process minify worker died (exit 70); resumed with one process per query"
    assert res.isolated and (res.nodes_before, res.nodes_after) == (6, 3)
    assert res.culprit is not None and res.culprit.ops == ["aten.relu.default"]

"""bot/minify/localize.py: which stage of torch.compile fails first. The fast tests need no torch
run: the debug backends asked for each failing backend, the order a program's probe asks them in
(the stage right before the failing backend first), and when the check's own rerun capture settles
the stage without any localize run. The slow tests rerun real checks: built models in processes
forked from this one (a model that dynamo gets wrong; a compiler bug, inductor's injected relu
bug), and command programs run again with their backend replaced by the environment hook."""

from __future__ import annotations

import sys
import textwrap
import time

import pytest

from bot.check.settings import Settings
from bot.minify import localize as loc
from bot.minify.procs import Interpreters
from bot.minify.records import Localized, Stage
from bot.records import CheckRow, Launcher, RerunCapture, Spec, StageVerdict
from bot.suites.model_file import yaml_models
from tests.ghstub.rundir import check_row, row_of

RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY"
DEBUG = ["eager", "aot_eager", "aot_eager_decomp_partition"]

# a model that is right in eager mode and off by one whenever dynamo traces it: a stand-in for a
# dynamo bug (every backend after dynamo inherits it)
TRACED_WRONG = """\
import torch


class TracedWrong(torch.nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        return y + 1 if torch.compiler.is_compiling() else y


def traced_wrong():
    return TracedWrong(), (torch.randn(4, 8),)
"""


# ---------------------------------------------------------------------------- fast: no torch run


@pytest.mark.parametrize("backend,asked", [
    ("inductor", DEBUG), ("aot_eager_decomp_partition", DEBUG[:2]), ("aot_eager", ["eager"]), ("eager", []),
    ("my_pkg.backends:buggy", DEBUG),   # a custom backend: do dynamo / AOT autograd alone already fail?
])
def test_the_debug_backends_asked_are_the_stages_before_the_failing_backend(backend, asked):
    assert loc.stage_backends(backend) == asked


class Stages:
    """``run(backend)`` for :func:`localize.probe`: the row a rerun with ``backend`` gives when the
    backends in ``failing`` fail; records the order it was asked in."""

    def __init__(self, *failing: str):
        self.failing, self.asked = set(failing), []

    def __call__(self, backend: str) -> CheckRow:
        self.asked.append(backend)
        return (CheckRow(status="fail_accuracy", failure_class="accuracy") if backend in self.failing
                else CheckRow(status="pass"))


def test_a_compiler_bug_is_settled_by_one_run_of_the_stage_before_the_failing_backend():
    run = Stages()
    assert loc.probe(DEBUG, run) == [{"backend": "aot_eager_decomp_partition", "status": "pass",
                                      "failure_class": None}]
    assert run.asked == ["aot_eager_decomp_partition"]


def test_when_the_stage_before_fails_too_the_earlier_ones_are_asked_in_order_up_to_the_first_failing():
    run = Stages("aot_eager", "aot_eager_decomp_partition")
    verdicts = loc.probe(DEBUG, run)
    assert run.asked == ["aot_eager_decomp_partition", "eager", "aot_eager"]
    assert [(v["backend"], v["status"]) for v in verdicts] == [   # reported in stage order
        ("eager", "pass"), ("aot_eager", "fail_accuracy"), ("aot_eager_decomp_partition", "fail_accuracy")]


def test_when_every_stage_fails_the_probe_stops_at_the_first_one():
    run = Stages(*DEBUG)
    assert [v["backend"] for v in loc.probe(DEBUG, run)] == ["eager", "aot_eager_decomp_partition"]
    assert run.asked == ["aot_eager_decomp_partition", "eager"]
    nothing = Stages()
    assert loc.probe([], nothing) == [] and nothing.asked == []


def _captured(tmp_path, failure_class: str, level: int, *, backend: str = "inductor", on_disk: bool = True,
              launchers: bool = True, rerun: bool = True) -> CheckRow:
    """A failing program's row whose rerun captured at ``level`` (bot.check.sweep), its launcher
    on disk or not (``rerun``: False for a row with no rerun capture at all)."""
    path = tmp_path / "launcher_1.py"
    if on_disk:
        path.write_text("# a minifier launcher torch wrote\n")
    status = "fail_accuracy" if failure_class == "accuracy" else "fail_to_run"
    row = row_of(check_row("prog", status=status, failure_class=failure_class, backend=backend))
    row.capture = RerunCapture("aot", level, [Launcher(1, str(path))] if launchers else [], 1) if rerun else None
    return row


@pytest.mark.parametrize("failure_class,level", [("compile_error", 2), ("accuracy", 4)])
def test_a_capture_after_aot_autograd_that_wrote_the_failing_graph_settles_the_stage_as_inductor(
        tmp_path, failure_class, level):
    row = _captured(tmp_path, failure_class, level)
    lz = loc.settled_by_capture(row)
    assert (lz.stage, lz.first_failing, lz.provisional) == ("inductor", "inductor", False)
    assert lz.ablation == [StageVerdict("inductor", row.status)]   # no debug backend was run
    assert f"level-{level} capture" in lz.note


def test_a_level_3_capture_of_every_graph_gives_a_provisional_stage_to_confirm_after_minify(tmp_path):
    lz = loc.settled_by_capture(_captured(tmp_path, "runtime_error", 3))
    assert (lz.stage, lz.provisional) == ("inductor", True)
    assert "the stages are rerun only if none fails on its own" in lz.note


@pytest.mark.parametrize("kw", [
    pytest.param(dict(on_disk=False), id="the launcher is gone (a run directory from another machine)"),
    pytest.param(dict(launchers=False), id="the rerun kept no launcher"),
    pytest.param(dict(backend="aot_eager"), id="repro_after=aot wraps inductor only"),
    pytest.param(dict(failure_class="accuracy", level=2), id="level 2 keeps no accuracy failure"),
    pytest.param(dict(rerun=False), id="the check was not rerun with a capture"),
])
def test_a_capture_that_cannot_tell_the_stage_leaves_it_to_a_localize_run(tmp_path, kw):
    args = {"failure_class": "compile_error", "level": 2, **kw}
    assert loc.settled_by_capture(_captured(tmp_path, args.pop("failure_class"), args.pop("level"), **args)) is None


# ---------------------------------------------------------------------------- slow: real reruns


@pytest.fixture(scope="module")
def traced_wrong(workdir) -> Spec:
    """The spec of a user model (``--suite yaml``) that dynamo gets wrong."""
    (workdir / "localize_models.py").write_text(TRACED_WRONG)
    (workdir / "models.yaml").write_text("traced_wrong: localize_models:traced_wrong\n")
    (model,) = yaml_models(str(workdir / "models.yaml"))
    return model.spec


@pytest.mark.slow
@pytest.mark.parametrize("server,warm", [(False, False), (True, False), (True, True)],
                         ids=["forked from this process", "forked from the fork server",
                              "forked from this process, warm already, beside a fork server"])
def test_a_model_dynamo_gets_wrong_is_localized_to_dynamo_by_its_first_forked_run(traced_wrong, workdir, server, warm,
                                                                                   monkeypatch):
    """A command's process that is not warm (`minify`) forks its stages from its fork server; one
    that is (`run`: its check warmed it) forks them itself and does not wait for the server."""
    from bot.torch_adapter import runtime

    if server:
        monkeypatch.setattr(runtime, "_WARMED", {"cpu"} if warm else set())
    row = row_of(check_row("traced_wrong", config={}))
    row.spec = traced_wrong
    events: list = []
    log = workdir / f"dynamo-{server}-{warm}.log"
    with Interpreters(1 if server else 0) as interps:
        lz = loc.localize(row, Settings(), str(workdir / f"dynamo-{server}-{warm}"), str(log), 120,
                          on_event=events.append, server=interps)
        if warm:
            assert interps._server is None   # never asked for
    assert events == [Stage("eager", "fail_accuracy")]   # the later stages are not run
    assert lz == Localized("dynamo", [StageVerdict("eager", "fail_accuracy"), StageVerdict("inductor", row.status)],
                           "eager")
    text = log.read_text()
    assert "$ (forked check) localize-eager\n" in text and "[fail_accuracy, " in text
    assert ("the same check forked from the fork server" in text) == (server and not warm)
    assert (workdir / f"dynamo-{server}-{warm}" / "localize-eager.log").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["inductor", "my_pkg.backends:buggy"])
def test_a_compiler_bug_passes_every_debug_backend_in_order_and_is_the_failing_backends_stage(workdir, backend):
    """The model is mlp_relu with inductor's injected relu bug in the check's config: nothing
    before the backend fails, so the stage is the backend's own (a custom backend's name)."""
    s = Settings(backend=backend, config={RELU: "accuracy"})
    row = row_of(check_row("mlp_relu", backend=backend, config=s.config))
    events: list = []
    wd = workdir / f"bug-{backend.replace(':', '_')}"
    lz = loc.localize(row, s, str(wd), str(workdir / "bug.log"), 120, on_event=events.append)
    assert events == [Stage(b, "pass") for b in DEBUG]
    assert (lz.stage, lz.first_failing) == (backend, backend)
    assert lz.ablation == [StageVerdict(b, "pass") for b in DEBUG] + [StageVerdict(backend, "fail_accuracy")]


def _program(tmp_path, name: str, source: str, *, status="fail_accuracy", failure_class="accuracy") -> CheckRow:
    """The row of a failing ``--suite command`` check of the Python program ``source``."""
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
    row = row_of(check_row(name, status=status, failure_class=failure_class, config={}))
    row.spec = Spec(source="command", command=f"{sys.executable} {name}.py", cwd=str(tmp_path), model=name)
    return row


@pytest.mark.slow
def test_a_rerun_program_is_stopped_at_its_time_limit_and_logged_with_the_backend_it_was_forced_to(tmp_path):
    row = _program(tmp_path, "hangs", "import time\ntime.sleep(120)\n", status="timeout", failure_class="timeout")
    log = tmp_path / "minifier.log"
    t = time.monotonic()
    r = loc.rerun_program(row, Settings(), str(tmp_path / "w"), str(log), "localize-eager", 2,
                          force_backend="eager")
    assert time.monotonic() - t < 30
    assert (r.status, r.failure_class) == ("timeout", "timeout")
    text = log.read_text()
    assert f"$ {sys.executable} hangs.py [backend forced to eager]\n" in text and "[timeout, " in text


@pytest.mark.slow
def test_a_program_that_fails_only_when_dynamo_traces_it_is_localized_to_dynamo(tmp_path):
    """The probe asks the stage before inductor (fails), then eager (fails too); the program then
    runs once with torch.compile off altogether, passes, so the failure is dynamo's, not the
    program's own."""
    row = _program(tmp_path, "dyn", """\
        import torch
        def f(x):
            y = torch.relu(x)
            return y + 1 if torch.compiler.is_compiling() else y
        x = torch.randn(4, 8)
        torch.testing.assert_close(torch.compile(f)(x), f(x))
        """)
    events: list = []
    lz = loc.localize_program(row, Settings(), str(tmp_path / "w"), str(tmp_path / "minifier.log"), 120,
                              on_event=events.append)
    assert [(e.backend, e.status) for e in events] == [
        ("aot_eager_decomp_partition", "fail_accuracy"), ("eager", "fail_accuracy"), ("no torch.compile", "pass")]
    assert lz == Localized("dynamo", [StageVerdict(loc.NO_COMPILE, "pass"), StageVerdict("eager", "fail_accuracy"),
                                      StageVerdict("aot_eager_decomp_partition", "fail_accuracy"),
                                      StageVerdict("inductor", "fail_accuracy")], "eager")

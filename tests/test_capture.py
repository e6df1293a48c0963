"""bot/minify/capture.py: rerunning a failing check so that its failing graph and real inputs land on
disk. The fast tests need no rerun: the repro level for each failure class, the runtime config of
an after-aot capture (settings this torch really has), and a program whose check's own rerun
already captured (its launchers are taken as they are, smallest first, and the program is not run
again). The slow tests capture for real: torch's repro-after-aot in a check forked from this
process, minify-bot's dynamo-level capture backend in a fresh one, and the probe that decides
between torch's repro-after-dynamo and that backend."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from bot.check.settings import Settings
from bot.minify import capture as cap
from bot.records import CheckRow, Launcher, RerunCapture, Spec
from bot.torch_adapter import config as tconfig
from bot.torch_adapter import repro as R
from tests.ghstub.rundir import check_row, row_of

RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY"


# ---------------------------------------------------------------------------- fast: nothing rerun


@pytest.mark.parametrize("failure_class,level", [("accuracy", 4), ("compile_error", 2), ("runtime_error", 3),
                                                 ("crash", 3), ("something_new", 2)])
def test_each_failure_class_is_captured_at_the_repro_level_that_keeps_what_minify_needs(failure_class, level):
    """4: the graph torch's accuracy check finds wrong; 2: the graph whose compile raised;
    3: every graph with its real inputs (the one a runtime error or crash stopped in is among them)."""
    assert cap.level_for(failure_class) == level


def test_an_after_aot_capture_turns_the_autograd_cache_off_with_settings_this_torch_has(tmp_path):
    debug = str(tmp_path / "debug")
    cfg = cap.capture_config(3, debug)
    assert cfg == {"dynamo.repro_after": "aot", "dynamo.repro_level": 3, "dynamo.debug_dir_root": debug,
                   "functorch.enable_autograd_cache": False}
    for key in cfg:   # each is one of this torch's config entries (a misspelt one would capture nothing)
        tconfig.default_of(key)


def _program_row(tmp_path: Path, *, level: int | None, launchers: list[Launcher] = (), graphs: int = 3) -> CheckRow:
    """A failing command check (accuracy) whose rerun captured ``launchers`` at ``level``; its
    program cannot run (python is given a file that does not exist)."""
    row = row_of(check_row("prog", config={}))
    row.spec = Spec(source="command", command=f"{sys.executable} no_such_program.py", cwd=str(tmp_path), model="prog")
    row.capture = RerunCapture("aot", level, list(launchers), graphs) if level is not None else None
    return row


def _launcher(tmp_path: Path, graph: int, size: int) -> Launcher:
    path = tmp_path / "kept" / f"launcher_{graph}.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text("#" * size)
    return Launcher(graph, str(path))


def test_the_level_the_checks_rerun_captured_at_is_tried_first(tmp_path):
    at3 = _program_row(tmp_path, level=3, launchers=[_launcher(tmp_path, 1, 10)])
    assert cap.shared_first([4, 3], at3) == [3, 4]
    assert cap.shared_first([2], at3) == [2]                                  # not a level this class uses
    assert cap.shared_first([4, 3], _program_row(tmp_path, level=4)) == [4, 3]   # it kept no launcher
    assert cap.shared_first([4, 3], _program_row(tmp_path, level=None)) == [4, 3]
    gone = _program_row(tmp_path, level=3, launchers=[Launcher(1, str(tmp_path / "another-job" / "l.py"))])
    assert cap.shared_first([4, 3], gone) == [4, 3]   # its launchers are not on this machine: no run saved


def test_the_checks_own_capture_is_used_at_its_level_only_and_only_with_launchers_on_this_machine(tmp_path):
    here, gone = _launcher(tmp_path, 2, 10), Launcher(1, str(tmp_path / "elsewhere" / "launcher_1.py"))
    row = _program_row(tmp_path, level=3, launchers=[gone, here])
    log = tmp_path / "minifier.log"
    shared = cap.shared_capture(row, 3, str(log))
    assert (shared.status, shared.failure_class, shared.compiled_graphs) == ("fail_accuracy", "accuracy", 3)
    assert shared.launchers == [here]
    assert log.read_text() == "capture: the check's rerun captured 1 launcher(s) at level 3; not run again\n"
    assert cap.shared_capture(row, 4, str(log)) is None                       # captured at another level
    assert cap.shared_capture(_program_row(tmp_path, level=3, launchers=[gone]), 3, str(log)) is None
    assert log.read_text().count("\n") == 1


def test_a_program_whose_rerun_captured_is_not_run_again_and_its_launchers_come_smallest_first(tmp_path):
    kept = [_launcher(tmp_path, 1, 300), _launcher(tmp_path, 2, 20), _launcher(tmp_path, 3, 100)]
    row = _program_row(tmp_path, level=3, launchers=kept, graphs=3)
    c = cap.run_capture_program(row, Settings(), str(tmp_path / "w"), str(tmp_path / "minifier.log"),
                                failure_class="accuracy", level=3, timeout=60)
    assert c.candidates == [kept[1].path, kept[2].path, kept[0].path] and c.launcher == kept[1].path
    assert c.graph_of == {kept[0].path: 1, kept[1].path: 2, kept[2].path: 3}   # "graph k of n" in the record
    assert (c.repro_after, c.repro_level, c.method, c.graphs) == ("aot", 3, "torch", 3)
    assert c.note == "captured by the check's own rerun (it failed the same way)"
    assert (c.row.status, c.row.failure_class, c.row.launchers) == ("fail_accuracy", "accuracy", None)
    assert not (tmp_path / "w" / "capture" / "capture.log").exists()   # the program was not run


def test_a_capture_rerun_leaves_the_programs_directory_as_it_was_its_own_repro_py_too(tmp_path):
    """torch copies a graph it dumps at level 4 to ./repro.py in the program's directory: its copy
    goes into the capture directory, and a repro.py of the user's own comes back byte for byte."""
    prog = tmp_path / "bench.py"
    prog.write_text("import os, sys\n"
                    "if os.environ.get('TORCHDYNAMO_REPRO_LEVEL') == '4':\n"
                    "    open('repro.py', 'w').write('# the graph torch dumped\\n')\n"
                    "sys.exit(1)\n")
    mine = tmp_path / "repro.py"
    mine.write_text("# my own repro, not torch's\n")
    row = _program_row(tmp_path, level=None)
    row.spec.command = f"{sys.executable} bench.py"
    work = tmp_path / "w"
    cap.run_capture_program(row, Settings(), str(work), str(tmp_path / "minifier.log"), failure_class="accuracy",
                            level=4, timeout=60)
    assert mine.read_text() == "# my own repro, not torch's\n"
    assert not (work / "capture" / "users_repro.py").exists()   # the copy kept meanwhile is gone
    assert (work / "capture" / "repro_from_cwd.py").read_text() == "# the graph torch dumped\n"
    mine.unlink()   # no file of the user's: torch's copy still leaves the directory
    (work / "capture" / "repro_from_cwd.py").unlink()
    cap.run_capture_program(row, Settings(), str(work), str(tmp_path / "minifier.log"), failure_class="accuracy",
                            level=4, timeout=60)
    assert not mine.exists() and (work / "capture" / "repro_from_cwd.py").exists()


# ---------------------------------------------------------------------------- slow: real captures


def _mlp_relu(backend: str = "inductor") -> tuple[CheckRow, Settings]:
    """The check of the built-in mlp_relu under inductor's injected relu accuracy bug, and its settings."""
    s = Settings(backend=backend, config={RELU: "accuracy"})
    return row_of(check_row("mlp_relu", backend=backend, config=s.config)), s


@pytest.mark.slow
def test_an_accuracy_failure_is_captured_after_aot_as_torchs_launcher_with_the_real_inputs(tmp_path):
    row, settings = _mlp_relu()
    c = cap.run_capture(row, settings, str(tmp_path), str(tmp_path / "minifier.log"), failure_class="accuracy",
                        stage_backend="inductor", repro_after="aot", level=None, timeout=300)
    assert (c.repro_after, c.repro_level, c.method, c.note) == ("aot", 4, "torch", None)
    debug = tmp_path / "capture" / "torch_compile_debug"
    # every launcher torch writes is kept, numbered (torch's own file holds only the last graph's)
    assert c.candidates == [c.launcher] and Path(c.launcher) == debug / "launchers" / "launcher_001.py"
    assert Path(c.launcher).read_text() == next(debug.glob("run_*/minifier/minifier_launcher.py")).read_text()
    assert c.row.failure_class is not None   # torch's level-4 check raised in the capture run
    rf = R.parse_repro_file(c.launcher)
    assert (rf.kind, rf.accuracy) == ("aot", "accuracy") and rf.config[RELU] == "accuracy"
    assert rf.storages and all(os.path.isfile(os.path.join(rf.save_dir, "storages", s)) for s in rf.storages)
    assert "$ (forked check) capture\n" in (tmp_path / "minifier.log").read_text()


@pytest.mark.slow
def test_the_projects_dynamo_level_capture_saves_each_graph_dynamo_made_with_its_inputs(tmp_path):
    """What capture uses where torch's repro-after-dynamo does not work: the check runs in a fresh
    process with minify-bot's capture backend wrapping the stage's backend."""
    row, settings = _mlp_relu()
    c = cap.run_capture(row, settings, str(tmp_path), str(tmp_path / "minifier.log"), failure_class="accuracy",
                        stage_backend="inductor", repro_after="project", level=None, timeout=300, probe_note="why")
    graphs = tmp_path / "capture" / "graphs"
    assert (c.repro_after, c.repro_level, c.method, c.note) == ("dynamo", None, "project", "why")
    assert c.candidates == [str(graphs / "graph_0.py")] == [c.launcher]
    assert (c.row.status, c.row.failure_class) == ("fail_accuracy", "accuracy")   # the wrapped backend still ran
    rf = R.parse_repro_file(c.launcher)
    assert rf.kind == "dynamo" and f"save_dir={str(graphs / 'graph_0_inputs')!r}" in rf.source
    assert rf.storages and all((graphs / "graph_0_inputs" / "storages" / s).is_file() for s in rf.storages)
    # its run_repro call spans lines: minify still reads the saved inputs, not random ones
    assert (rf.save_dir, rf.backend) == (str(graphs / "graph_0_inputs"), "inductor")


@pytest.mark.slow
def test_a_capture_run_past_its_time_limit_is_stopped_and_says_so(tmp_path):
    row, settings = _mlp_relu()
    t = time.monotonic()
    c = cap.run_capture(row, settings, str(tmp_path), str(tmp_path / "minifier.log"), failure_class="accuracy",
                        stage_backend="inductor", repro_after="project", level=None, timeout=1)
    assert time.monotonic() - t < 20
    assert (c.launcher, c.candidates, c.row) == (None, [], None)
    assert c.note == "the capture run hit its 1 s limit"


@pytest.mark.slow
def test_the_repro_after_dynamo_probe_gives_the_reason_it_cannot_be_used(tmp_path):
    """A backend the probe's clean graph cannot compile with, and a probe that cannot finish in
    its time: each is a reason (capture then uses minify-bot's own capture backend), never None."""
    log = tmp_path / "minifier.log"
    reason = cap.probe_dynamo("no_such_backend_for_minify_bot", str(tmp_path), str(log))
    assert reason is not None and "no_such_backend_for_minify_bot" in reason
    assert "probe-dynamo no_such_backend_for_minify_bot" in log.read_text()
    assert cap.probe_dynamo("eager", str(tmp_path), str(log), timeout=1) == "the probe did not finish in 1 s"


CACHED_PROGRAM = """
import torch, torch._inductor.config as ic
from torch._dynamo.utils import counters
ic.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
try:
    torch.compile(m)(torch.randn(4, 16))
finally:
    print("fx graph cache hits:", counters["inductor"].get("fxgraph_cache_hit", 0))
"""


@pytest.mark.slow
def test_a_rerun_captures_graphs_that_come_from_the_fx_graph_cache_the_first_run_filled(tmp_path):
    """The capture rerun keeps the FX graph cache on (only the AOTAutograd cache's hit skips torch's
    repro wrapper): the graph comes out of the cache the check's first run filled, and is still dumped
    at level 3 and judged at level 4."""
    import subprocess

    from bot.suites.command import capture_env

    (tmp_path / "prog.py").write_text(CACHED_PROGRAM)
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("TORCHINDUCTOR_FX_GRAPH_CACHE", None)

    def run(extra):
        return subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, env={**env, **extra}, capture_output=True,
                              text=True, timeout=600)

    first = run({})
    assert first.returncode == 0 and "fx graph cache hits: 0" in first.stdout, first.stderr[-2000:]
    for level in (3, 4):
        rerun = run(capture_env(level, str(tmp_path / f"debug{level}")))
        assert "fx graph cache hits: 0" not in rerun.stdout, (level, rerun.stdout)
        assert list((tmp_path / f"debug{level}").glob("torch_compile_debug/run_*/minifier/minifier_launcher.py")), \
            (level, rerun.stderr[-2000:])
        assert (rerun.returncode != 0) is (level == 4) and ("AccuracyError" in rerun.stderr) is (level == 4)

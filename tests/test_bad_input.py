"""Bad input a new user meets first: a program that never ran, an unwritable run directory, a
`python` that is not the bot's, and the settings' names. Each is exit 2 with one `error:` line,
from a real `minify-bot` process running a real program; the results already obtained are written."""

from __future__ import annotations

import json
import os
import sys

import pytest

from bot.cli import build_parser

IN_VENV = sys.prefix != sys.base_prefix


def _errors(proc) -> list[str]:
    return [ln for ln in proc.stderr.splitlines() if ": error: " in ln]


def _check(bot, tmp_path, command, *extra, name="prog", env=None, stage="check"):
    out = tmp_path / f"out-{name}"
    proc = bot(stage, "--command", command, "--name", name, "--out", out, "--timeout", "120", *extra,
               cwd=tmp_path, env=env)
    return proc, out


# program source -> (why it never ran, words of the error line)
NEVER_RAN = {
    "syntax": ("def f(:\n    pass\n", "syntax error", "SyntaxError"),
    "imports": ("import no_such_model_library_xyz\n", "import error",
                "ModuleNotFoundError: No module named 'no_such_model_library_xyz'"),
    "raises": ("import sys\nif len(sys.argv) < 3:\n    raise ValueError('usage: bench.py MODEL STEPS')\n",
               "failed before anything was compiled", "ValueError: usage: bench.py MODEL STEPS"),
}


@pytest.mark.parametrize("name", sorted(NEVER_RAN))
def test_a_program_that_never_ran_exits_2_with_its_reason_and_keeps_its_result(bot, tmp_path, name):
    source, why, words = NEVER_RAN[name]
    (tmp_path / f"{name}.py").write_text(source)
    proc, out = _check(bot, tmp_path, f"python {name}.py", name=name)
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = _errors(proc)
    assert line.startswith(f"minify-bot check: error: the program of check {name}-") and f"({why})" in line, line
    assert words in line, line
    assert "Traceback" not in proc.stderr
    # the result is written, and the table does not call it a runtime or accuracy failure
    (row,) = json.loads((out / "results.json").read_text())["checks"]
    assert (row["failure_class"], row["classified_by"]) == ("setup_error", f"never ran: {why}")
    assert "setup_error" in proc.stdout and "runtime_error" not in proc.stdout and "accuracy" not in proc.stdout
    assert not row.get("reruns"), "a program that never ran is not run again"


def test_a_missing_program_file_or_command_exits_2(bot, tmp_path):
    proc, _ = _check(bot, tmp_path, "python nosuch_bench.py", name="nofile")
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = _errors(proc)
    assert "never ran (missing file)" in line and "nosuch_bench.py" in line, line
    proc, _ = _check(bot, tmp_path, "cd . && no_such_benchmark_tool --steps 3", name="noprog")
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = _errors(proc)
    assert "never ran (missing program)" in line and "no_such_benchmark_tool" in line, line
    proc, _ = _check(bot, tmp_path, "no_such_benchmark_tool --steps 3", name="noexec")
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = _errors(proc)
    assert "never ran (could not start)" in line and "no_such_benchmark_tool" in line, line


def test_under_run_the_error_names_run(bot, tmp_path):
    proc, _ = _check(bot, tmp_path, "python nosuch_bench.py", "--no-report", name="viarun", stage="run")
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = _errors(proc)
    assert line.startswith("minify-bot run: error: the program of check viarun-"), line
    assert "minify-bot check:" not in proc.stderr


def test_a_program_that_fails_after_starting_to_compile_is_still_a_failure(bot, tmp_path):
    """The hook saw a frame start compiling: whatever it raised is the check's failure (exit 1)."""
    (tmp_path / "compiled.py").write_text(
        "import json, os\n"
        "with open(os.environ['MINIFY_BOT_HOOK_STATE'], 'a') as fh:\n"
        "    fh.write(json.dumps({'event': 'compile', 'graph': 1}) + '\\n')\n"
        "raise ValueError('wrong shapes from the compiled model')\n")
    proc, out = _check(bot, tmp_path, "python compiled.py", "--reruns", "0", name="compiled")
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert not _errors(proc)
    (row,) = json.loads((out / "results.json").read_text())["checks"]
    assert row["failure_class"] == "runtime_error"


def test_an_unwritable_run_directory_exits_2_in_one_line_before_anything_runs(bot, tmp_path):
    (tmp_path / "afile").write_text("not a directory\n")
    (tmp_path / "ran.py").write_text("open('RAN', 'w').write('yes')\n")
    for stage in ("check", "run"):
        proc = bot(stage, "--command", "python ran.py", "--out", tmp_path / "afile" / "out", cwd=tmp_path)
        assert proc.returncode == 2, proc.stderr[-3000:]
        (line,) = _errors(proc)
        assert line.startswith(f"minify-bot {stage}: error: --out ") and "cannot write there" in line, line
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "RAN").exists()


@pytest.mark.skipif(not IN_VENV, reason="the bot runs outside a virtual environment")
def test_python_in_a_command_is_the_bots_own_when_no_environment_is_active(bot, tmp_path):
    """A venv that was never activated: `python` on PATH is another Python (here a fake one that
    has no torch); the program still runs under the bot's interpreter."""
    fake = tmp_path / "otherbin"
    fake.mkdir()
    (fake / "python").write_text("#!/bin/sh\necho \"ModuleNotFoundError: No module named 'torch'\" >&2\nexit 1\n")
    (fake / "python").chmod(0o755)
    (tmp_path / "which.py").write_text("import sys\nopen('EXE', 'w').write(sys.executable)\n")
    env = {"PATH": f"{fake}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": "", "CONDA_PREFIX": ""}
    proc, _ = _check(bot, tmp_path, "python which.py", name="which", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert os.path.dirname((tmp_path / "EXE").read_text()) == os.path.dirname(os.path.abspath(sys.executable))


def test_an_import_error_under_an_active_environment_names_the_interpreter_that_ran(bot, tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    os.symlink(sys.executable, venv / "bin" / "python")
    (tmp_path / "needs.py").write_text("import no_such_model_library_xyz\n")
    env = {"PATH": f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(venv)}
    proc, _ = _check(bot, tmp_path, "python needs.py", name="needs", env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = _errors(proc)
    assert "(import error)" in line and f"its python is {venv / 'bin' / 'python'}" in line, line


def test_the_cli_and_the_action_share_one_vocabulary_and_keep_the_old_spellings():
    from bot.action.inputs import Inputs
    from bot.errors import UsageError

    parse = build_parser().parse_args
    new = parse(["run", "--fail-on", "regression", "--labels", "nightly-bot,torch", "--max-new-issues", "3"])
    old = parse(["run", "--fail-on", "new", "--label", "nightly-bot", "--max-new", "3"])
    assert (new.fail_on, new.label, new.max_new) == (old.fail_on, old.label, old.max_new) == \
        ("regression", "nightly-bot", 3)
    assert parse(["check", "--fail-on", "any"]).fail_on == parse(["check"]).fail_on == "failure"
    with pytest.raises(SystemExit):
        parse(["check", "--fail-on", "sometimes"])
    # the Action's words, and the CLI's old ones, read the same
    for given, want in (("failure", "failure"), ("any", "failure"), ("new", "regression"), ("never", "never")):
        assert Inputs.read({"INPUT_FAIL-ON": given}).fail_on == want
    with pytest.raises(UsageError, match="fail-on"):
        Inputs.read({"INPUT_FAIL-ON": "sometimes"})


# Action inputs that are no setting of `minify-bot run`: the Action's own plumbing, an old spelling,
# or a setting the CLI spells as a switch (--no-minify, --no-trace) or once per value (--build)
NOT_RUN_FLAGS = {"stage", "config-file", "minify", "trace", "builds", "shards", "pr-issues", "github-token",
                 "known-file", "known-public-key", "signing-key", "bot-login", "request", "expected-sha",
                 "check-result", "artifact-url", "working-directory", "requirements", "setup", "install", "python"}


def test_every_setting_the_action_takes_has_the_same_name_on_the_cli():
    from pathlib import Path

    import yaml

    parser = build_parser()
    (sub,) = [a for a in parser._actions if a.dest == "_command_name"]
    flags = {s for a in sub.choices["run"]._actions for s in a.option_strings}
    inputs = yaml.safe_load((Path(__file__).resolve().parent.parent / "action.yml").read_text())["inputs"]
    assert [n for n in inputs if f"--{n}" not in flags and n not in NOT_RUN_FLAGS] == []
    parse = parser.parse_args
    a = parse(["run", "--minify-budget", "30", "--verification-runs", "2", "--pytorch-path", "pt"])
    b = parse(["run", "--budget", "30", "--verify-runs", "2", "--pytorch", "pt"])
    assert (a.budget, a.verify_runs, a.pytorch) == (b.budget, b.verify_runs, b.pytorch) == (30.0, 2, "pt")


FAILS = """\
import json, os, sys
with open(os.environ["MINIFY_BOT_HOOK_STATE"], "a") as fh:   # the hook's record of one compiled frame
    fh.write(json.dumps({"event": "compile", "graph": 1}) + "\\n")
print("compiled and eager outputs differ: accuracy mismatch")
sys.exit(1)
"""


def test_a_sweep_with_a_program_that_never_ran_still_reports_the_others_then_exits_2(bot, tmp_path):
    (tmp_path / "fails.py").write_text(FAILS)
    (tmp_path / "cmds.yaml").write_text("commands:\n  broken: python nosuch_bench.py\n  fails: python fails.py\n")
    proc = bot("run", "--command-file", tmp_path / "cmds.yaml", "--no-minify", "--reruns", "0",
               "--out", tmp_path / "out", "--issues-dir", tmp_path / "issues", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr[-3000:]
    (line,) = _errors(proc)
    assert line.startswith("minify-bot run: error: the program of check broken-") and "(missing file)" in line
    from bot.tracker.local import LocalTracker

    bodies = [r["body"] for r in LocalTracker(tmp_path / "issues").records() if "dashboard" not in r["labels"]
              and "minify-bot-dashboard" not in r["labels"]]
    assert len(bodies) == 1 and "fails" in bodies[0] and "nosuch_bench" not in bodies[0], bodies


def test_the_actions_check_stage_says_a_program_never_ran_and_keeps_its_result(runner, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    res = runner("schedule", {}, {"stage": "check", "command": "python nosuch_bench.py", "github-token": ""},
                 workspace=ws)
    assert res.rc == 2, res.stdout[-3000:] + res.stderr[-3000:]
    assert "never ran" in res.summary and "nosuch_bench" not in res.summary   # no path of the runner
    assert "the program of check command-" in res.stdout + res.stderr   # the log has the reason
    (row,) = json.loads((res.run_dir / "results.json").read_text())["checks"]
    assert row["classified_by"] == "never ran: missing file"


def test_a_failure_in_torchs_compiler_stack_is_never_taken_for_a_program_that_never_ran():
    """An import regression inside inductor (raised before dynamo started a frame) is the compiler's;
    an eager op failing before anything compiled is the program's own; after a compile, a failure."""
    from bot.suites.classify import never_ran

    def tb(path, exc):
        return f'Traceback (most recent call last):\n  File "{path}", line 3, in <module>\n    x()\n{exc}\n'

    inductor = tb("/venv/lib/python3.11/site-packages/torch/_inductor/compile_fx.py", "ImportError: cannot import y")
    eager = tb("/venv/lib/python3.11/site-packages/torch/nn/modules/linear.py",
               "RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    assert never_ran(1, inductor, 0) is None
    assert never_ran(1, eager, 0) == "failed before anything was compiled"
    assert never_ran(1, eager, 2) is None and never_ran(1, eager, None) is None
    assert never_ran(1, "benchmark: wrong result\n", 0) is None   # no exception: judged by its words

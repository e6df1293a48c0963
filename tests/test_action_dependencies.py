"""The checked code's own dependencies in the Action's check stage (inputs `requirements` and `setup`):
installed before the check, in the workspace, only after the stage has made sure the job holds no
credential, into a venv of their own layered on the bot's interpreter (never into the installed bot's
environment), whose interpreter then runs the check; a failing install is bad input (exit 2). Real
`minify-bot action` processes, real venv, pip and bash."""

from __future__ import annotations

import json
import os
import sys

from tests.ghstub.action import assert_token_not_leaked

PROGRAM = "import depmod, deplib, sys\nsys.exit(0 if depmod.VALUE == 42 and deplib.VALUE == 7 else 1)\n"
# `python` here is the dependency venv's: deplib lands in its site-packages, depmod in the workspace
SETUP = ("command -v python > which-python.txt && echo 'VALUE = 42' > depmod.py && python -c \"import site, "
         "pathlib; pathlib.Path(site.getsitepackages()[0], 'deplib.py').write_text('VALUE = 7')\"")


def _inputs(**extra) -> dict:
    return {"stage": "check", "command": "python prog.py", "minify": "false", "github-token": "",
            "requirements": "requirements.txt", "setup": SETUP, **extra}


def _workspace(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "prog.py").write_text(PROGRAM)
    (ws / "requirements.txt").write_text("pyyaml\n")   # installed already: pip answers without a network
    return ws


def test_requirements_and_setup_install_into_a_venv_of_their_own_whose_interpreter_runs_the_check(runner,
                                                                                                  tmp_path):
    import site

    ws = _workspace(tmp_path)
    res = runner("schedule", {}, _inputs(), workspace=ws)
    assert res.rc == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "$ pip install -r requirements.txt" in res.stdout and f"$ {SETUP}" in res.stdout
    assert "Requirement already satisfied: pyyaml" in res.stdout   # the bot's own packages count as installed
    # `python` in the setup line is the dependency venv's, whatever PATH had first: not the bot's own
    which = (ws / "which-python.txt").read_text().strip()
    assert os.path.basename(os.path.dirname(os.path.dirname(which))).startswith("minify-deps-"), which
    assert os.path.dirname(which) != os.path.dirname(os.path.abspath(sys.executable))
    assert not any(os.path.exists(os.path.join(d, "deplib.py")) for d in site.getsitepackages())
    (row,) = json.loads((res.run_dir / "results.json").read_text())["checks"]
    assert row["status"] == "pass", row   # the program imported what setup installed and wrote


def test_a_failing_install_is_bad_input(runner, tmp_path):
    ws = _workspace(tmp_path)
    res = runner("schedule", {}, _inputs(setup="echo cannot build the extension >&2; exit 3"), workspace=ws)
    assert res.rc == 2, res.stdout[-3000:] + res.stderr[-3000:]
    assert "installing the checked code's dependencies failed" in res.summary
    assert not (res.run_dir / "results.json").exists(), "the check did not run"
    res = runner("schedule", {}, _inputs(requirements="no-such-requirements.txt", setup=""), workspace=ws)
    assert res.rc == 2, res.stdout[-3000:] + res.stderr[-3000:]
    assert "pip install -r no-such-requirements.txt" in res.summary


def test_nothing_is_installed_next_to_a_credential(runner, tmp_path):
    """The install runs the checked code's packaging (setup.py, build hooks): it is model code, so
    a job holding a token refuses it before anything runs."""
    ws = _workspace(tmp_path)
    res = runner("schedule", {}, _inputs(**{"github-token": "ghp_" + "a" * 36}), workspace=ws)
    assert res.rc == 2 and "refusing to run model code" in res.stdout + res.stderr + res.summary
    assert not (ws / "which-python.txt").exists() and not (ws / "depmod.py").exists()
    assert_token_not_leaked(res, "ghp_" + "a" * 36)

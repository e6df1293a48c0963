"""bot.action.inputs: the Action's inputs are read once and bad ones are one clear usage error."""

from __future__ import annotations

import pytest

from bot.action.inputs import Inputs, number_input
from bot.errors import UsageError


def test_inputs_are_read_with_the_runners_names_and_defaults():
    i = Inputs.read({"INPUT_MODELS": "a, b\nc", "INPUT_DRY_RUN": "true", "INPUT_CONFIG": "inductor.x=1\ndynamo.y=2",
                     "INPUT_FAIL-ON": "failure", "INPUT_EXPECTED-SHA": "A" * 40, "INPUT_MAX-NEW-ISSUES": "3"})
    assert i.models == ["a", "b", "c"] and i.dry_run is True and i.config == ["inductor.x=1", "dynamo.y=2"]
    assert i.fail_on == "failure" and i.expected_sha == "a" * 40 and i.max_new_issues == 3
    d = Inputs.read({})
    assert (d.stage, d.fail_on, d.tracker, d.minify, d.dynamic) == ("all", "regression", "github", True, False)


@pytest.mark.parametrize("env,reason", [
    ({"INPUT_STAGE": "deploy"}, "input 'stage' must be one of"),
    ({"INPUT_FAIL-ON": "sometimes"}, "input 'fail-on'"),
    ({"INPUT_TRACKER": "jira"}, "input 'tracker'"),
    ({"INPUT_CONFIG": "novalue"}, "KEY=VALUE"),
    ({"INPUT_EXPECTED-SHA": "abc"}, "40-hex"),
    ({"INPUT_CHECK-RESULT": "maybe"}, "check-result"),
])
def test_bad_inputs_are_usage_errors(env, reason):
    with pytest.raises(UsageError, match=reason):
        Inputs.read(env)


@pytest.mark.parametrize("stage", ["Report", "REPORT", "Known", "Authorize", "All", "chéck"])
def test_a_stage_not_spelled_exactly_is_refused(stage):
    """GitHub's expressions compare ignoring case (action.yml hands the job's token to ``Report``)
    while the install step's bash does not (it would install ``Report`` unpinned): only the
    documented lowercase names are taken, anything else is a usage error (exit 2)."""
    with pytest.raises(UsageError, match="input 'stage' must be one of all, check, report, authorize, known") as exc:
        Inputs.read({"INPUT_STAGE": stage})
    assert exc.value.exit_code == 2


@pytest.mark.parametrize("stage", ["Report", "report\n", "known;x", "authorize "])
def test_the_install_step_refuses_a_stage_not_spelled_exactly_before_installing(tmp_path, stage):
    """action.yml's install step (run by bash as the runner does) stops with exit 2 before it
    creates or installs anything, for a stage the run step would hand the job's token to."""
    import subprocess
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[1]
    [step] = [s for s in yaml.safe_load((root / "action.yml").read_text())["runs"]["steps"] if s.get("id") == "install"]
    out = tmp_path / "github_output"
    out.write_text("")
    env = {"PATH": "/usr/bin:/bin", "ACTION_PATH": str(root), "MINIFY_INSTALL": "always", "MINIFY_STAGE": stage,
           "MINIFY_PYTHON": str(tmp_path / "no-python"), "RUNNER_TEMP": str(tmp_path), "GITHUB_OUTPUT": str(out)}
    res = subprocess.run(["bash", "-c", step["run"]], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 2, res.stdout + res.stderr
    assert "::error::input stage must be one of all, check, report, authorize, known" in res.stdout
    assert out.read_text() == "" and not (tmp_path / "minify-bot-venv").exists()
    # the documented names go on to the install (here: a python that does not exist, so it fails later)
    ok = subprocess.run(["bash", "-c", step["run"]], env={**env, "MINIFY_STAGE": "report"}, capture_output=True,
                        text=True, timeout=60)
    assert ok.returncode not in (0, 2) and "input stage" not in ok.stdout


def test_numeric_inputs_for_stage_options():
    assert number_input("timeout", "") is None
    assert number_input("timeout", "1e3") == 1000.0
    assert number_input("repro-level", "2", int) == 2
    with pytest.raises(UsageError, match="input 'repro-level' must be an integer"):
        number_input("repro-level", "two", int)
    with pytest.raises(UsageError, match="input 'timeout' must be a number"):
        number_input("timeout", "10m")

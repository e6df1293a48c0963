"""bot/commands/action.py: `minify-bot action`, what action.yml runs, as a workflow step runs it: bad
input is exit 2 with a GitHub error annotation (the work itself is bot/action's, tests/test_action_*.py)."""

from __future__ import annotations

NO_WORKFLOW = {"GITHUB_EVENT_NAME": "", "GITHUB_EVENT_PATH": "", "INPUT_STAGE": ""}


def test_outside_a_workflow_it_says_so_and_exits_2(bot, tmp_path):
    proc = bot("action", env=NO_WORKFLOW, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "::error title=minify-bot%3A bad input::GITHUB_EVENT_NAME is not set" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_bad_stage_input_is_named(bot, tmp_path):
    proc = bot("action", env={**NO_WORKFLOW, "INPUT_STAGE": "bogus"}, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2
    assert "input 'stage' must be one of all, check, report, authorize, known" in proc.stderr


def test_the_stage_flag_takes_only_the_stages(bot, tmp_path):
    proc = bot("action", "--stage", "nope", env=NO_WORKFLOW, cwd=tmp_path, timeout=120)
    assert proc.returncode == 2 and "invalid choice: 'nope'" in proc.stderr

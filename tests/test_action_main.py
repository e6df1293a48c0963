"""bot.action.main: the (event, stage) -> handler table and the step's end (outputs, summary, exit)."""

from __future__ import annotations

import argparse
import itertools
import json
import os

import pytest

from bot.action import main
from bot.action.inputs import STAGES
from bot.errors import UsageError
from tests.test_action_stages import make_ctx


def test_every_event_kind_and_stage_has_one_handler(tmp_path):
    assert set(main.ROUTES) == set(itertools.product(("comment", "sweep", "other"), STAGES))
    assert main.event_kind(make_ctx(tmp_path, "issue_comment")) == "comment"
    assert all(main.event_kind(make_ctx(tmp_path, e)) == "sweep" for e in main.SWEEP_EVENTS)
    assert main.event_kind(make_ctx(tmp_path, "release")) == "other"


def test_authorize_on_a_sweep_event_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="stage `authorize` is for issue_comment events"):
        main.execute(make_ctx(tmp_path, "schedule", stage="authorize"))


def _step(tmp_path, monkeypatch, event: str, payload, **inputs):
    """Run the Action's entry point in this process, as action.yml does (environment in, files out)."""
    for key in [k for k in os.environ if k.startswith(("INPUT_", "GITHUB_"))]:
        monkeypatch.delenv(key)
    (tmp_path / "event.json").write_text(payload if isinstance(payload, str) else json.dumps(payload))
    files = {"GITHUB_OUTPUT": tmp_path / "output", "GITHUB_STEP_SUMMARY": tmp_path / "summary"}
    env = {"GITHUB_EVENT_NAME": event, "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
           "GITHUB_WORKSPACE": str(tmp_path), **{k: str(v) for k, v in files.items()},
           **{"INPUT_" + k.upper().replace("_", "-"): v for k, v in inputs.items()}}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    try:
        code = main.run(argparse.Namespace(stage=None, dry_run=None))
    except UsageError as exc:
        code = exc.exit_code
    return code, files["GITHUB_OUTPUT"].read_text(), files["GITHUB_STEP_SUMMARY"].read_text()


def test_an_unhandled_event_does_nothing_and_says_so(tmp_path, monkeypatch):
    code, outputs, text = _step(tmp_path, monkeypatch, "release", {})
    assert code == 0 and "exit-code" in outputs
    assert "_Nothing to do for a release event._" in text and "minify-bot all stage, release event" in text


def test_a_comment_that_is_no_command_is_ignored(tmp_path, monkeypatch):
    payload = {"action": "created", "comment": {"id": 1, "body": "looks good"}, "issue": {"number": 2}}
    code, outputs, text = _step(tmp_path, monkeypatch, "issue_comment", payload, stage="authorize")
    assert code == 0 and "authorized" in outputs
    assert "## minify-bot: /minify" in text and "holds no /minify command" in text


def test_bad_input_ends_with_exit_2_outputs_and_a_summary(tmp_path, monkeypatch):
    code, outputs, text = _step(tmp_path, monkeypatch, "schedule", {}, fail_on="sometimes")
    assert code == 2 and "exit-code" in outputs and "❌ **Bad input:** input 'fail-on'" in text

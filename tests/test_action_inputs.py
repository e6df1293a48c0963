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


def test_numeric_inputs_for_stage_options():
    assert number_input("timeout", "") is None
    assert number_input("timeout", "1e3") == 1000.0
    assert number_input("repro-level", "2", int) == 2
    with pytest.raises(UsageError, match="input 'repro-level' must be an integer"):
        number_input("repro-level", "two", int)
    with pytest.raises(UsageError, match="input 'timeout' must be a number"):
        number_input("timeout", "10m")

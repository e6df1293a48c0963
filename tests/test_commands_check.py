"""bot/commands/check.py: `minify-bot check` as a user runs it. The flags are validated before
anything is written (exit 2), a sweep's exit code says whether it found failures (--fail-on), and
--matrix is the product of its axes. Nothing runs a sweep here (its warm-up compiles: the slow tier's
test_check_zoo.py and test_check_robust.py run sweeps)."""

from __future__ import annotations

import pytest

from bot import rundir
from bot.commands.check import exit_code, parse_matrix
from bot.errors import UsageError
from bot.records import CheckRow


def _row(model, failure_class=None, baseline=None):
    return CheckRow(id=model, model=model, status="fail_accuracy" if failure_class else "pass",
                    failure_class=failure_class, baseline=baseline)


def test_the_exit_code_says_whether_failures_were_found():
    clean = [_row("a"), _row("b")]
    known = [_row("a"), _row("b", "accuracy", "known")]
    new = [_row("a", "crash", "new")]
    assert [exit_code(rows, "failure") for rows in (clean, known, new)] == [0, 1, 1]
    assert [exit_code(rows, "regression") for rows in (clean, known, new)] == [0, 0, 1]
    assert exit_code([_row("a", "accuracy")], "regression") == 1  # no baseline: every failure is new
    assert [exit_code(rows, "never") for rows in (clean, known, new)] == [0, 0, 0]
    with pytest.raises(ValueError, match="must be one of"):
        exit_code(clean, "sometimes")


@pytest.mark.parametrize("args,words", [
    (["--models", "no_such_model"], "no_such_model"),
    (["--backend", "inductr"], "unknown backend 'inductr'"),
    (["--config", "inductor.fallback_randm=1"], "did you mean inductor.fallback_random?"),
    (["--suite", "zoo", "--model-file", "m.yaml"], "--model-file does not apply to --suite zoo"),
    (["--model-file", "m.yaml", "--command", "true"], "belong to different model sources"),
    (["--accuracy-pattern", "x"], "apply to --suite command or harness, not zoo"),
    (["--batch-size", "0"], "--batch-size must be a positive integer"),
    (["--reruns", "-1"], "--reruns must be >= 0"),
    (["--matrix", "color=red"], "invalid --matrix 'color=red'"),
    (["--shard", "3/2"], "invalid --shard"),
])
def test_bad_flags_are_exit_2_before_anything_is_written(bot, tmp_path, args, words):
    out = tmp_path / "out"
    proc = bot("check", *args, "--out", out, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert words in proc.stderr and "Traceback" not in proc.stderr
    assert not (out / rundir.RESULTS).exists()


def test_list_shows_the_models_and_runs_nothing(bot, tmp_path):
    proc = bot("check", "--list", "--out", tmp_path / "out", timeout=120)
    assert proc.returncode == 0 and proc.stdout.split()[0] == "mlp_relu"
    assert not (tmp_path / "out" / rundir.RESULTS).exists()


def test_matrix_is_the_product_of_its_axes():
    combos = parse_matrix(["backend=eager,aot_eager,eager", "dynamic=false,on"])
    assert combos == [{"backend": "eager", "dynamic": False}, {"backend": "eager", "dynamic": True},
                      {"backend": "aot_eager", "dynamic": False}, {"backend": "aot_eager", "dynamic": True}]
    assert parse_matrix([]) == [{}]
    with pytest.raises(UsageError, match="given twice"):
        parse_matrix(["mode=inference", "mode=training"])
    with pytest.raises(UsageError, match="expected true or false"):
        parse_matrix(["dynamic=maybe"])

"""Stage options defined once: the typed records and the command lines of check, minify and report agree."""

from __future__ import annotations

import dataclasses

import pytest

from bot.cli import build_parser
from bot.options import (
    STAGE_OPTIONS,
    CheckOptions,
    MinifyOptions,
    ReportOptions,
    to_argv,
)


def _parse(stage: str, argv: list[str]):
    return build_parser().parse_args([stage, *argv])


@pytest.mark.parametrize("stage", sorted(STAGE_OPTIONS))
def test_every_flag_of_a_stage_is_an_option_and_the_defaults_agree(stage, monkeypatch):
    monkeypatch.delenv("GITHUB_REPOSITORY", raising=False)
    cls = STAGE_OPTIONS[stage]
    ns = _parse(stage, [])
    dests = {k for k in vars(ns) if not k.startswith("_")}
    assert dests == {f.name for f in dataclasses.fields(cls)}
    assert cls.from_args(ns) == cls().resolved()


FULL = [
    CheckOptions(out="o", models=["a", "b"], suite="command", command="python x.py --flag 'q'", name="n",
                 accuracy_pattern=["diff", "x y"], error_pattern=["boom"], backend="aot_eager", mode="training",
                 dtype="bfloat16", device="cpu", dynamic=True, timeout=12.5, memory_limit_mb=512, shard="2/3",
                 baseline="b.json", config=["inductor.a=1", "dynamo.b=x"], matrix=["backend=eager,inductor"],
                 fail_on="regression", reruns=0, retry=["c1", "c2"]),
    MinifyOptions(out="o", only="x,y", repro_after="aot", repro_level=2, strict_accuracy=True, isolate=True,
                  verify_runs=5, budget=30.0, no_localize=True, no_bisect=True, check_timeout=60.0),
    ReportOptions(out="o", tracker="github", issues_dir="i", repo="o/r", api_url="http://h", bot_login="b",
                       label="l", max_new=0, close_after=3, assignees=["u1", "u2"], templates="t", dry_run=True,
                       run_url="http://r", artifact_url="http://a", run_id="r1", pr_run=True,
                       trusted_commands=["python x.py"], file_flaky=False, dashboard=False),
]


@pytest.mark.parametrize("opts", FULL, ids=lambda o: o.STAGE)
def test_to_argv_round_trips_through_the_stage_parser(opts):
    back = type(opts).from_args(_parse(opts.STAGE, to_argv(opts)))
    assert back == opts.resolved()


def test_only_given_options_reach_the_command_line_in_field_order():
    assert to_argv(CheckOptions(models=["m"], backend="inductor", config=["inductor.x=1"])) == [
        "--models", "m", "--backend", "inductor", "--config", "inductor.x=1"]
    assert to_argv(CheckOptions(timeout=600.0)) == ["--timeout", "600"]
    assert to_argv(ReportOptions(file_flaky=True, dashboard=True)) == ["--dashboard"]
    assert to_argv(ReportOptions(file_flaky=False)) == ["--no-file-flaky"]
    assert to_argv(MinifyOptions()) == []


def test_resolved_fills_defaults_and_keeps_what_was_given():
    r = CheckOptions(backend="eager").resolved()
    assert (r.backend, r.mode, r.timeout, r.fail_on, r.out) == ("eager", "inference", 600.0, "failure", "minify-out")
    assert r.models == [] and r.dynamic is False

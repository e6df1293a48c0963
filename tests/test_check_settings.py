"""bot/check/settings.py: what a check runs with, its validation errors and its id."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bot.check.settings import Settings, check_id, parse_shard, shard
from bot.errors import UsageError


@pytest.mark.parametrize("field,value,words", [
    ("mode", "eval", "unknown mode 'eval': expected one of inference, training"),
    ("dtype", "fp8", "unknown dtype 'fp8'"),
    ("device", "tpu", "unknown device 'tpu'"),
    ("timeout", 0, "--timeout must be a positive"),
    ("timeout", float("nan"), "--timeout must be a positive"),
])
def test_bad_settings_are_usage_errors_naming_the_choices(field, value, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(")) as info:
        Settings(**{field: value}).validate(with_torch=False)
    assert info.value.exit_code == 2


def test_with_torch_backend_and_config_are_checked():
    with pytest.raises(UsageError, match="unknown backend 'inductr'"):
        Settings(backend="inductr").validate()
    with pytest.raises(UsageError, match="unknown config key"):
        Settings(config={"inductor.no_such_option": "1"}).validate()
    ok = Settings(config={"inductor.fallback_random": "true"}).validate()
    assert ok.config == {"inductor.fallback_random": True}  # text from YAML becomes the option's type


def test_round_trip_and_unknown_keys_ignored():
    s = Settings(backend="aot_eager", mode="training", dtype="bfloat16", dynamic=True, config={"a.b": 1})
    assert Settings.from_json(s.to_json()) == s
    assert Settings.from_dict({**s.to_dict(), "from_a_newer_bot": 1}) == s
    assert s.replace(dtype="float16").dtype == "float16" and s.dtype == "bfloat16"


def test_check_id_is_file_name_safe_and_distinguishes_settings():
    a = check_id("resnet18", Settings())
    assert a == "resnet18-inductor-inference-float32-cpu"
    assert check_id("resnet18", Settings(dynamic=True)) == a + "-dynamic"
    odd = check_id("m/with space", Settings(backend="my.mod:fn"))
    assert "/" not in odd and " " not in odd and ":" not in odd
    ids = {check_id("m", Settings(mode=m, dtype=d)) for m in ("inference", "training") for d in ("float32", "amp")}
    assert len(ids) == 4


def test_shards_partition_the_models_deterministically():
    assert parse_shard(None) == (1, 1) and parse_shard(" 2 / 4 ") == (2, 4)
    for bad in ("0/2", "3/2", "1/0", "a/b", "1-2"):
        with pytest.raises(UsageError, match="invalid --shard"):
            parse_shard(bad)
    models = [SimpleNamespace(name=f"m{k:02d}") for k in range(10)]
    parts = [shard(list(reversed(models)), i, 3) for i in (1, 2, 3)]
    names = [m.name for part in parts for m in part]
    assert sorted(names) == [m.name for m in models] and len(set(names)) == 10
    assert parts[0] == shard(models, 1, 3)  # the input order does not matter

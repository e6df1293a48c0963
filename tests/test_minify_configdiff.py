"""bot/minify/worker/configdiff.py: the true config diff against torch's real defaults, and ddmin."""

from __future__ import annotations

import itertools

from bot.minify.worker.configdiff import ddmin, true_diff
from bot.records import ConfigEntry
from bot.torch_adapter import config as tconfig


def test_ddmin_finds_the_keys_needed_together():
    keys = [f"k{i}" for i in range(12)]
    calls = []

    def fails(sub):
        calls.append(list(sub))
        return {"k3", "k9"} <= set(sub)

    assert ddmin(keys, fails) == ["k3", "k9"]
    assert len(calls) < 2 ** 12


def test_ddmin_result_is_one_minimal_for_every_pair():
    keys = list("abcdef")
    for need in itertools.combinations(keys, 2):
        out = ddmin(keys, lambda sub, need=need: set(need) <= set(sub))
        assert out == list(need)  # order kept, nothing extra
    assert ddmin(["only"], lambda sub: True) == ["only"]


def test_true_diff_against_real_defaults():
    key = "inductor.fallback_random"
    default = tconfig.default_of(key)
    values = {key: not default, "inductor.triton.cudagraphs": tconfig.default_of("inductor.triton.cudagraphs")}
    assert true_diff(values) == [ConfigEntry(key, default, not default)]
    assert true_diff(values, ignore={key}) == []


def test_true_diff_unknown_key_counts_as_default_none():
    out = true_diff({"inductor.no_such_key": 3, "inductor.also_missing": None})
    assert out == [ConfigEntry("inductor.no_such_key", None, 3)]


def test_true_diff_with_own_defaults_and_odd_values_is_jsonable():
    out = true_diff({"x": (1, 2), "y": 5}, default_of={"x": [0], "y": 5}.__getitem__)
    assert out == [ConfigEntry("x", [0], [1, 2])]

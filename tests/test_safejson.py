"""bot/safejson.py: JSON from untrusted places parses as json does, and hostile JSON is a ValueError
with a one-line reason (never RecursionError, never minutes of big-integer conversion)."""

from __future__ import annotations

import json
import math
import time

import pytest

from bot import safejson


def test_ordinary_json_parses_as_json_does():
    doc = {"a": [1, 2.5, "x", None, True], "b": {"c": "[{not brackets}]"}, "n": -12345678901234567890}
    text = json.dumps(doc)
    assert safejson.loads(text) == json.loads(text) == doc
    assert safejson.loads(text.encode()) == doc


def test_nan_and_infinity_that_the_checks_write_are_kept():
    out = safejson.loads('{"max_abs": NaN, "tol": Infinity}')
    assert math.isnan(out["max_abs"]) and out["tol"] == math.inf


def test_nesting_depth_ignores_brackets_in_strings():
    assert safejson.nesting_depth('{"a": "[[[[\\"[[["}') == 1
    assert safejson.nesting_depth("[[1], [[2]]]") == 3
    assert safejson.nesting_depth('"no container"') == 0


def test_deep_nesting_is_a_value_error_quickly():
    text = "[" * 100_000 + "]" * 100_000
    start = time.monotonic()
    with pytest.raises(ValueError, match="nested 100000 levels deep"):
        safejson.loads(text)
    assert time.monotonic() - start < 5
    assert safejson.loads("[" * 64 + "]" * 64) is not None
    with pytest.raises(ValueError, match="65 levels"):
        safejson.loads("[" * 65 + "]" * 65)
    assert safejson.loads("[[[]]]", max_depth=3) == [[[]]]
    with pytest.raises(ValueError):
        safejson.loads("[[[]]]", max_depth=2)


def test_huge_numbers_are_refused():
    with pytest.raises(ValueError, match="digits"):
        safejson.loads("1" * 5000)
    with pytest.raises(ValueError, match="characters"):
        safejson.loads("1." + "1" * 5000)
    assert safejson.loads("9" * 100) == int("9" * 100)


def test_malformed_input_says_where_in_one_line():
    with pytest.raises(ValueError) as info:
        safejson.loads('{"a": 1,\n "b": }')
    assert "line 2" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ValueError, match="not UTF-8"):
        safejson.loads(b'{"a": "\xff"}')

"""bot/torch_adapter/config.py: `--config` overrides validated against torch's real config modules
(a typo or a wrong type is exit 2 before any model runs), and the line a repro carries read back."""

from __future__ import annotations

import pytest
import torch._inductor.config as inductor_config

from bot.errors import UsageError
from bot.torch_adapter import config as tconfig


def test_values_take_the_options_declared_type():
    out = tconfig.parse_overrides(["inductor.fallback_random=yes", "inductor.realize_reads_threshold=0x10",
                                   "inductor.cpp.simdlen=none", "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy",
                                   " dynamo.recompile_limit = 3"])
    assert out == {"inductor.fallback_random": True, "inductor.realize_reads_threshold": 16,
                   "inductor.cpp.simdlen": None, "inductor.cpp.inject_relu_bug_TESTING_ONLY": "accuracy",
                   "dynamo.recompile_limit": 3}


@pytest.mark.parametrize("item,words", [
    ("inductor.fallback_randm=1",
     "unknown config key 'inductor.fallback_randm' (did you mean inductor.fallback_random?)"),
    ("triton.cudagraphs=1", "invalid config key 'triton.cudagraphs': expected inductor.<key>, dynamo.<key>"),
    ("inductor.fallback_random=maybe",
     "invalid value 'maybe' for config inductor.fallback_random: expected true or false"),
    ("inductor.realize_reads_threshold=four", "invalid value 'four' for config inductor.realize_reads_threshold"),
    ("inductor.realize_reads_threshold=none", "invalid value 'none'"),  # None is not allowed there
    ("inductor.cpp.inject_relu_bug_TESTING_ONLY=segfault", "expected one of accuracy, compile_error, runtime_error"),
    ("inductor.fallback_random", "invalid --config 'inductor.fallback_random': expected KEY=VALUE"),
    ("=1", "expected KEY=VALUE"),
])
def test_mistakes_are_usage_errors_in_one_line(item, words):
    with pytest.raises(UsageError) as info:
        tconfig.parse_overrides([item])
    assert words in str(info.value) and "\n" not in str(info.value)


def test_revalidating_parsed_values_from_json_or_yaml():
    assert tconfig.validate_overrides({"inductor.fallback_random": True, "inductor.cpp.threads": 2,
                                       "inductor.cpp.simdlen": None}) == \
        {"inductor.fallback_random": True, "inductor.cpp.threads": 2, "inductor.cpp.simdlen": None}
    with pytest.raises(UsageError):
        tconfig.validate_overrides({"inductor.cpp.threads": [1, 2]})
    assert tconfig.validate_overrides(None) == {}


def test_a_repro_config_line_reads_back_as_its_key():
    line = tconfig.config_line("inductor.cpp.inject_relu_bug_TESTING_ONLY", "accuracy")
    assert line == "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'"
    assert tconfig.key_of_line("  " + line + "  ") == ("inductor.cpp.inject_relu_bug_TESTING_ONLY", "'accuracy'")
    assert tconfig.key_of_line(tconfig.config_line("dynamo.recompile_limit", 3)) == ("dynamo.recompile_limit", "3")
    assert tconfig.key_of_line("torch.manual_seed(0)") is None
    assert tconfig.key_of_line("os.system = 'x'") is None


def test_overrides_set_the_live_config_and_defaults_are_torchs():
    key = "inductor.realize_reads_threshold"
    assert tconfig.default_of(key) == inductor_config.realize_reads_threshold == 4
    with inductor_config.patch(realize_reads_threshold=4):  # restores the value afterwards
        tconfig.apply_overrides({key: 7})
        assert inductor_config.realize_reads_threshold == 7
    assert inductor_config.realize_reads_threshold == 4

"""selftest injects the bug into the code generator the device really uses, and the Triton keys
go through the same config handling as the C++ ones (no compile: runs without a GPU)."""

from __future__ import annotations

import pytest

from bot.commands.selftest import injection_key
from bot.errors import UsageError


def test_a_device_without_an_injectable_code_generator_is_a_usage_error():
    with pytest.raises(UsageError, match="mps"):
        injection_key("mps")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_injection_key_is_validated_diffed_and_written_like_any_config(device):
    from bot.minify.package import clean_source
    from bot.minify.worker.configdiff import true_diff
    from bot.torch_adapter.config import parse_overrides

    key = injection_key(device)
    cfg = parse_overrides([f"{key}=accuracy", "inductor.compile_threads=1"])
    assert cfg[key] == "accuracy"
    diff = {d.key: d for d in true_diff(cfg)}
    assert diff[key].default is None and diff[key].value == "accuracy"
    codegen = key.split(".")[1]
    line = f"torch._inductor.config.{codegen}.inject_relu_bug_TESTING_ONLY = 'accuracy'"
    # what a packaged repro carries: the line the product writes (bot.minify.package)
    repro = "import torch\nimport torch.fx.experimental._config\n\nclass Repro(torch.nn.Module):\n    pass\n"
    assert line in clean_source(repro, [diff[key]], standalone=False, name="repro.py").splitlines()
    with pytest.raises(UsageError):
        parse_overrides([f"{key}=sometimes"])


def test_selftest_rejects_an_unknown_device_with_exit_2(bot):
    p = bot("selftest", "--device", "tpu")
    assert p.returncode == 2 and "error:" in p.stderr and "Traceback" not in p.stderr

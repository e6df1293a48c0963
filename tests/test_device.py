"""CUDA and forking: the process that forks checks must never initialize CUDA.

No GPU here: the GPU is the boundary these tests stand in for (torch reporting a CUDA build and an
NVML device). What they pin down was found on a real H100 runner, where every forked check failed
with "Cannot re-initialize CUDA in forked subprocess" until the parent stopped touching CUDA.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from bot.commands.selftest import injection
from bot.torch_adapter import device, runtime, versions
from bot.torch_adapter.config import parse_overrides, validate_overrides

ROOT = Path(__file__).resolve().parent.parent


def test_selftest_injects_the_bug_of_the_devices_code_generator():
    assert injection("cpu") == "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy"
    assert injection("cuda") == "inductor.triton.inject_relu_bug_TESTING_ONLY=accuracy"
    # both keys are real config keys of this torch, accepted by the same validator the check uses
    for dev in ("cpu", "cuda"):
        validated = validate_overrides(parse_overrides([injection(dev)]))
        assert list(validated.values()) == ["accuracy"]


def test_cpu_build_reports_no_cuda_without_touching_it():
    assert device.cuda_device_count() == 0
    assert not device.cuda_initialized()
    device.assert_fork_safe("checks")  # does not raise


def test_device_cuda_on_a_cpu_machine_is_a_usage_error(bot, tmp_path):
    proc = bot("check", "--device", "cuda", "--models", "mlp_relu", "--out", tmp_path / "run")
    assert proc.returncode == 2
    last_line = proc.stderr.strip().splitlines()[-1]
    assert last_line.endswith("--device cuda: this torch build or machine has no CUDA device")
    assert not (tmp_path / "run").exists()


@pytest.fixture
def visible_gpu(monkeypatch):
    """torch as a CUDA build would look with one GPU visible through NVML."""
    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: True)
    monkeypatch.setattr(torch.cuda, "_device_count_nvml", lambda: 1, raising=False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")

    asked = []

    def runtime_call(name):
        def call(*a, **k):
            asked.append(name)
            raise RuntimeError(f"{name}: the CUDA runtime was asked in the process that forks checks")
        return call

    # the calls that initialize CUDA (or mark forked children bad) in a real CUDA build
    monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: True)
    for owner, name in ((torch.backends.cudnn, "version"), (torch.cuda, "get_rng_state"),
                        (torch.cuda, "get_device_name"), (torch._C, "_cuda_getDeviceCount")):
        monkeypatch.setattr(owner, name, runtime_call(name), raising=False)
    return asked


def test_warm_up_does_not_compile_when_a_gpu_is_visible(visible_gpu, monkeypatch):
    assert device.cuda_device_count() == 1
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda *a, **k: compiled.append(a) or (lambda *x: None))
    runtime.warm_up("cpu")
    assert compiled == []
    assert visible_gpu == []


def test_versions_ask_no_cuda_runtime_in_the_forking_process(visible_gpu):
    info = versions.collect()
    assert info["cuda"] == "13.0"
    assert visible_gpu == []
    # cuDNN's version comes from a child process: none on a CPU build, the library's on a CUDA build
    # (the registry's torch 2.15.0 carries cuDNN even where no GPU is visible)
    expected = None
    if torch.backends.cuda.is_built():
        import subprocess
        import sys

        expected = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cudnn.version() or '')"],
                                  capture_output=True, text=True, timeout=120).stdout.strip() or None
    assert info["cudnn"] == expected


@pytest.fixture
def gpu_count_forgotten():
    """device remembers whether a GPU is visible for the life of a process: each test asks afresh."""
    device._gpu_visible.cache_clear()
    yield
    device._gpu_visible.cache_clear()


def test_a_cuda_build_without_a_gpu_forks_its_checks(monkeypatch, gpu_count_forgotten):
    """The registry's torch 2.15.0 on a CPU machine: no NVIDIA driver, so no NVML; dynamo's
    torch.cuda.is_available() around each compile falls back to the CUDA runtime's device count,
    which marks forked children as in a bad fork. With no device nothing is lost: no refusal."""
    import shutil

    monkeypatch.setattr(torch.backends.cuda, "is_built", lambda: True)
    monkeypatch.setattr(torch.cuda, "_device_count_nvml", lambda: -1, raising=False)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)  # no nvidia-smi either
    monkeypatch.setattr(torch._C, "_cuda_isInBadFork", lambda: True, raising=False)
    assert device.cuda_device_count() == 0
    assert not device.cuda_initialized()
    device.assert_fork_safe("its checks")  # does not raise


def test_a_bad_fork_with_a_gpu_visible_is_refused(visible_gpu, monkeypatch, gpu_count_forgotten):
    from bot.errors import InfraError

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch._C, "_cuda_isInBadFork", lambda: True, raising=False)
    with pytest.raises(InfraError, match="CUDA was initialized in the process that forks its checks"):
        device.assert_fork_safe("its checks")


def test_a_machine_without_nvidias_driver_lets_the_fork_server_compile_on_the_cpu(tmp_path, monkeypatch):
    """The fork server's throwaway compile (which spares every forked verification run a first
    compile) runs on a CUDA build of torch too, but only where no GPU can be visible: no nvidia-smi,
    no NVML. Where the driver's tool is present it is skipped, as a compile could initialize CUDA."""
    from bot.torch_adapter import device
    from bot.torch_adapter.repro import PREWARM, REPRO_PRELOAD, repro_preload

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("ctypes.util.find_library", lambda name: None)
    assert device.no_nvidia_driver()
    assert repro_preload() == (*REPRO_PRELOAD[:-1], f"{PREWARM}:compile_once_on_cpu")
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nexit 0\n")
    smi.chmod(0o755)
    assert not device.no_nvidia_driver()
    assert repro_preload() == REPRO_PRELOAD and REPRO_PRELOAD[-1] == f"{PREWARM}:compile_once"


AFTER_A_COMPILED_BACKWARD = """
import json, os, torch
from bot.fuzz.choose import forked_features
from bot.torch_adapter.device import autograd_threads_started
before = autograd_threads_started()
torch.compile(lambda x: (x.sin() * 2).sum(), backend="eager")(torch.randn(3, requires_grad=True)).backward()
started = autograd_threads_started()
pid = os.fork()
if pid == 0:
    try:
        torch.ones(2, requires_grad=True).sum().backward()
    except RuntimeError:
        os._exit(3)
    os._exit(0)
child_backward_ok = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
features = forked_features([("fuzz-s0-i000001", "inference", False)])[0]
print(json.dumps(dict(before=before, started=started, child_backward_ok=child_backward_ok, features=features)))
"""


def test_a_process_whose_backward_started_autograd_threads_is_known_and_forks_no_backward(tmp_path):
    """On a CUDA build (the current release, no GPU) a backward through dynamo starts torch's autograd
    device threads, and a child forked after it cannot run a backward; on a CPU build it starts none.
    Either way the detection says what a forked child would meet, and the fuzzer's candidates still
    get their features (from a fresh interpreter where a fork could not)."""
    import json
    import subprocess
    import sys

    from bot.fuzz import generate as gen
    from bot.fuzz.choose import static_features

    out = subprocess.run([sys.executable, "-c", AFTER_A_COMPILED_BACKWARD], capture_output=True, text=True,
                         timeout=600, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["before"] is False
    assert seen["started"] is (not seen["child_backward_ok"]), seen
    assert seen["features"] == static_features(gen.generate(0, 1), "inference", False)


def test_a_named_autograd_device_thread_is_seen(autograd_device_thread):
    assert device.autograd_threads_started()


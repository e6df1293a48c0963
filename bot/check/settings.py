"""Check settings: backend, mode, dtype, device, dynamic shapes, compiler config overrides."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from bot.errors import UsageError

MODES = ("inference", "training")
DTYPES = ("float32", "float16", "bfloat16", "amp")
DEVICES = ("cpu", "cuda")


@dataclass
class Settings:
    backend: str = "inductor"
    mode: str = "inference"
    dtype: str = "float32"
    device: str = "cpu"
    dynamic: bool = False
    config: dict[str, Any] = field(default_factory=dict)
    timeout: float = 600.0

    def to_dict(self) -> dict:
        return asdict(self)

    def replace(self, **changes) -> "Settings":
        return replace(self, **changes)

    @classmethod
    def from_dict(cls, d: dict) -> "Settings":
        known = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        return cls(**known)

    # as a field of a typed record (bot.check.one.CheckRequest)
    def to_json(self) -> dict:
        return self.to_dict()

    @classmethod
    def from_json(cls, d: dict) -> "Settings":
        return cls.from_dict(d)

    def validate(self, *, with_torch: bool = True) -> "Settings":
        if self.mode not in MODES:
            raise UsageError(f"unknown mode {self.mode!r}: expected one of {', '.join(MODES)}")
        if self.dtype not in DTYPES:
            raise UsageError(f"unknown dtype {self.dtype!r}: expected one of {', '.join(DTYPES)}")
        if self.device not in DEVICES:
            raise UsageError(f"unknown device {self.device!r}: expected one of {', '.join(DEVICES)}")
        if not (self.timeout > 0):
            raise UsageError("--timeout must be a positive number of seconds")
        if with_torch:
            from bot.torch_adapter import config as tconfig
            from bot.torch_adapter import runtime

            runtime.validate_backend(self.backend)
            self.config = tconfig.validate_overrides(self.config)
            if self.device == "cuda":
                from bot.torch_adapter.device import cuda_device_count

                # NVML, not the CUDA runtime: this process forks the checks, and CUDA does not survive a fork
                if cuda_device_count() < 1:
                    raise UsageError("--device cuda: this torch build or machine has no CUDA device")
        return self


def check_id(model: str, s: Settings) -> str:
    backend = re.sub(r"[^A-Za-z0-9_.]+", "_", s.backend)
    parts = [model, backend, s.mode, s.dtype, s.device]
    if s.dynamic:
        parts.append("dynamic")
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", "-".join(parts))


def parse_shard(text: str | None) -> tuple[int, int]:
    if not text:
        return 1, 1
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not m:
        raise UsageError(f"invalid --shard {text!r}: expected i/N, e.g. 1/4")
    i, n = int(m.group(1)), int(m.group(2))
    if n < 1 or not 1 <= i <= n:
        raise UsageError(f"invalid --shard {text!r}: need 1 <= i <= N")
    return i, n


def shard(items: list, i: int, n: int) -> list:
    """Deterministic split: item k goes to shard (k mod N) + 1, in a stable (sorted by name) order."""
    ordered = sorted(items, key=lambda m: m.name)
    return [m for k, m in enumerate(ordered) if k % n == i - 1]

"""``--suite timm``: timm architectures by name with ``pretrained=False`` (nothing downloaded).

Tiny variants (2 blocks, narrow) so that a check runs on a CPU in seconds. Needs the optional
extra ``pip install 'minify-action[models]'``. timm imports torchvision when it is imported
(``timm.layers`` and ``timm.data``, pure Python): where torchvision is missing this source says so
and exits with a usage error. Where torchvision is installed but its C++ extension does not load
beside the installed torch (the registry's torchvision wheel is a CUDA build; a CPU torch lacks
the CUDA libraries it links), the two op schemas torchvision's import needs are defined first,
and the models, which use none of torchvision's C++ ops, build and compile as usual.
"""

from __future__ import annotations

from typing import Any

from bot import extra_hint
from bot.errors import UsageError
from bot.records import Spec
from bot.suites.source import Library, Model

EXTRA_HINT = extra_hint("timm")
DEFAULT_BATCH = 2

# name -> (timm model name, create_model kwargs, image size, description)
MODELS: dict[str, tuple[str, dict, int, str]] = {
    "resnet18": ("resnet18", dict(num_classes=10), 32, "ResNet-18, basic blocks (relu)"),
    "vit_tiny_patch16_224": ("vit_tiny_patch16_224", dict(img_size=32, patch_size=8, depth=2, num_classes=10),
                             32, "ViT-Tiny, 2 blocks on 32x32 images (gelu)"),
    "mobilenetv3_small_050": ("mobilenetv3_small_050", dict(num_classes=10), 32,
                              "MobileNetV3 small (hardswish, squeeze-excite)"),
}


# torchvision registers fake (meta) kernels for these ops at import without checking that its C++
# extension loaded; the schemas are torchvision's own (csrc/ops/nms.cpp, quantized qnms)
_TORCHVISION_FAKE_OPS = {
    "nms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}


def _define_missing_torchvision_ops() -> bool:
    """When torchvision's C++ extension cannot load beside this torch (the registry's torchvision
    is a CUDA build; a CPU torch lacks the CUDA libraries it links), torchvision's import stops at
    ``register_fake("torchvision::nms")``: "operator torchvision::nms does not exist". timm's image
    classifiers use none of torchvision's C++ ops, only its Python modules, so defining the two
    schemas (no kernels: calling them still fails) lets the Python side import. Returns whether
    anything was defined; never when the extension loaded (the ops then exist)."""
    import torch

    defined = False
    for name, schema in _TORCHVISION_FAKE_OPS.items():
        if hasattr(torch.ops.torchvision, name):  # an op namespace raises AttributeError for unknown ops
            continue
        torch.library.define(f"torchvision::{name}", schema)
        defined = True
    return defined


def require_timm():
    import sys

    try:
        import timm
    except RuntimeError as exc:
        if "torchvision::" not in str(exc) or "does not exist" not in str(exc) or not _define_missing_torchvision_ops():
            raise UsageError(f"--suite timm: timm failed to import ({str(exc).splitlines()[0]})") from exc
        for mod in [m for m in sys.modules if m == "torchvision" or m.startswith(("torchvision.", "timm"))]:
            del sys.modules[mod]  # the half-imported packages: import them again
        return require_timm()
    except Exception as exc:  # noqa: BLE001 - ImportError, or torchvision's C++ ops failing to load
        raise UsageError(f"--suite timm needs timm and a torchvision that loads beside this torch "
                         f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
                         f"install the timm extra and the torchvision built for this torch: {EXTRA_HINT}") from exc
    return timm


def build_model(name: str, batch_size: int | None = None) -> tuple[Any, tuple, int]:
    import torch

    timm = require_timm()
    if name not in MODELS:
        raise UsageError(f"unknown timm model {name!r}")
    arch, kwargs, size, _ = MODELS[name]
    model = timm.create_model(arch, pretrained=False, **kwargs)
    bs = batch_size or DEFAULT_BATCH
    return model, (torch.randn(bs, 3, size, size),), bs


def models():

    return [Model(n, Spec(source="timm", model=n), d, DEFAULT_BATCH) for n, (_, _, _, d) in MODELS.items()]



require = require_timm   # what Library asks


class Timm(Library):
    name = "timm"
    library = __name__


SOURCE = Timm()

"""``--suite timm``: timm architectures by name with ``pretrained=False`` (nothing downloaded).

Tiny variants (2 blocks, narrow) so that a check runs on a CPU in seconds. Needs the optional
extra ``pip install 'minify-action[models]'``. timm imports torchvision when it is imported
(``timm.layers`` and ``timm.data``): where torchvision is missing, or is a build that does not
load beside the installed torch, this source says so and exits with a usage error.
"""

from __future__ import annotations

from typing import Any

from bot.errors import UsageError

EXTRA_HINT = "pip install 'minify-action[timm]'"
DEFAULT_BATCH = 2

# name -> (timm model name, create_model kwargs, image size, description)
MODELS: dict[str, tuple[str, dict, int, str]] = {
    "resnet18": ("resnet18", dict(num_classes=10), 32, "ResNet-18, basic blocks (relu)"),
    "vit_tiny_patch16_224": ("vit_tiny_patch16_224", dict(img_size=32, patch_size=8, depth=2, num_classes=10),
                             32, "ViT-Tiny, 2 blocks on 32x32 images (gelu)"),
    "mobilenetv3_small_050": ("mobilenetv3_small_050", dict(num_classes=10), 32,
                              "MobileNetV3 small (hardswish, squeeze-excite)"),
}


def require_timm():
    try:
        import timm
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
    from bot.suites import Model

    return [Model(n, {"source": "timm", "model": n}, d, DEFAULT_BATCH) for n, (_, _, _, d) in MODELS.items()]

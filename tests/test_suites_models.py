"""Real architectures offline: --suite huggingface (transformers from config classes) and
--suite timm. Listing and the missing-extra error are fast; one small real sweep + minify is slow."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

RELU = "inductor.cpp.inject_relu_bug_TESTING_ONLY"


def test_huggingface_lists_at_least_six_architectures_with_the_harness_names(bot):
    pytest.importorskip("transformers")
    p = bot("check", "--suite", "huggingface", "--list")
    assert p.returncode == 0, p.stderr
    names = [line.split()[0] for line in p.stdout.splitlines() if line.strip()]
    assert {"BertForMaskedLM", "MobileBertForMaskedLM", "T5Small", "ResNetForImageClassification"} <= set(names)
    assert len(names) >= 6


@pytest.mark.parametrize("name, out_shape", [("LlamaForCausalLM", (2, 16, 256)),
                                             ("BartForConditionalGeneration", (2, 16, 256)),
                                             ("ConvNextForImageClassification", (2, 2))])
def test_any_transformers_model_class_asked_for_by_name_is_built_tiny_and_runs(name, out_shape):
    """Not only the curated eight: a model class of the installed transformers named with
    --models is offered and built from a tiny config of its own config class (a decoder, an
    encoder-decoder fed decoder inputs too, a hierarchical vision model)."""
    pytest.importorskip("transformers")
    import torch

    from bot.suites import available, build, select

    [model] = select(available("huggingface", names=[name]), [name])
    assert model.spec.model == name and "tiny" in model.description
    module, inputs, bs = build(model.spec)
    assert bs == 2 and sum(p.numel() for p in module.parameters()) < 500_000
    with torch.no_grad():
        assert tuple(module(*inputs)[0].shape) == out_shape


def test_a_name_that_is_no_transformers_model_class_is_an_unknown_model(bot):
    pytest.importorskip("transformers")
    for name in ("NoSuchModelForAnything", "BertConfig", "AutoTokenizer"):
        p = bot("check", "--suite", "huggingface", "--models", name)
        assert p.returncode == 2 and f"unknown model '{name}'" in p.stderr, p.stderr
        assert "Traceback" not in p.stderr


def test_a_missing_models_extra_is_one_error_line_and_exit_2(bot, tmp_path):
    fake = tmp_path / "transformers"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('No module named transformers')\n")
    import os

    p = bot("check", "--suite", "huggingface", "--list", env={"PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parent.parent), str(tmp_path)])})
    assert p.returncode == 2, p.stderr
    assert "minify-bot check: error:" in p.stderr and "pip install 'transformers==5.23.0'" in p.stderr
    assert "Traceback" not in p.stderr


def _timm_importable() -> bool:
    from bot.errors import UsageError
    from bot.suites.timm import require_timm

    try:
        require_timm()  # timm imports torchvision at import time (with the op schemas it needs)
    except UsageError:
        return False
    return True


def test_timm_lists_its_models_or_says_what_is_missing(bot):
    importable = _timm_importable()
    p = bot("check", "--suite", "timm", "--list")
    if importable:
        assert p.returncode == 0 and "resnet18" in p.stdout
    else:
        assert p.returncode == 2 and "'timm==1.0.31' 'torchvision==0.28.0'" in p.stderr and "Traceback" not in p.stderr


def test_timm_models_build_with_random_weights_and_run():
    """Where the timm extra is installed (timm plus torchvision; torchvision's C++ extension need
    not load beside this torch), every listed model builds with pretrained=False and runs."""
    if not _timm_importable():
        pytest.skip("timm/torchvision not installed (pyproject's timm extra)")
    import torch

    from bot.suites import timm as T

    assert len(T.MODELS) >= 2
    for name in T.MODELS:
        model, inputs, bs = T.build_model(name)
        with torch.no_grad():
            out = model.eval()(*inputs)
        assert out.shape == (bs, 10) and torch.isfinite(out).all(), name


@pytest.mark.slow
def test_real_architectures_sweep_clean_and_a_relu_bug_reduces_to_exactly_the_relu(bot, workdir):
    pytest.importorskip("transformers")
    models = "MobileBertForMaskedLM,ViTForImageClassification"
    clean = workdir / "clean"
    p = bot("check", "--suite", "huggingface", "--models", models, "--out", clean, "--timeout", "300")
    assert p.returncode == 0, p.stderr[-3000:]
    rows = json.loads((clean / "results.json").read_text())["checks"]
    assert [r["status"] for r in rows] == ["pass", "pass"], [(r["model"], r["status"], r.get("error")) for r in rows]

    run = workdir / "relu"
    p = bot("check", "--suite", "huggingface", "--models", models, "--out", run, "--timeout", "300",
            "--config", f"{RELU}=accuracy", "--reruns", "0")
    rows = {r["model"]: r for r in json.loads((run / "results.json").read_text())["checks"]}
    # ViT has no relu (gelu): no false alarm; MobileBERT's relu FFNs are caught
    assert rows["ViTForImageClassification"]["status"] == "pass"
    assert rows["MobileBertForMaskedLM"]["failure_class"] == "accuracy", p.stderr[-3000:]
    p = bot("minify", "--out", run, "--budget", "300")
    assert p.returncode == 1, p.stderr[-3000:]
    rec = json.loads((run / "failures" / rows["MobileBertForMaskedLM"]["id"] / "failure.json").read_text())
    r = rec["repro"]
    assert r["status"] == "minimized", r["reason"]
    assert [g["op"] for g in r["graph"]] == ["aten.relu.default"]
    assert r["nodes_before"] > 100 and r["nodes_after"] == 3  # input, relu, output
    assert rec["culprit"]["ops"] == ["aten.relu.default"] and rec["culprit"]["method"] == "compiled-alone"
    assert rec["culprit"]["bisect"] and "relu" in rec["culprit"]["bisect"]
    assert r["verification"]["failed_same_way"] == 3

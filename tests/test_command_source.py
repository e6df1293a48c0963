"""The command source end to end: benchmark programs written here (each compiles a small model
under an inductor bug it injects itself, compares with eager in its own words and exits 1) go
through `check --suite command` and `minify` as real `python -m bot` subprocesses, and must end
with a verified repro of exactly the culprit op; programs that are not compiler failures must end
with a clear reason and no repro. Plus the classifier and the source flags (no compile)."""

from __future__ import annotations

import json
import re
import sys
import textwrap

import pytest

from bot.suites.classify import Patterns, classify

HEADER = """\
import sys, torch
import torch._inductor.config as ic
torch.manual_seed(0)
"""

# name -> (program, failure class, repro level)
PROGRAMS = {
    # accuracy, judged with torch.testing.assert_close
    "acc": (HEADER + """
ic.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
x = torch.randn(4, 8)
with torch.no_grad():
    torch.testing.assert_close(torch.compile(m)(x), m(x))
""", "accuracy"),
    # a compile error the program reports in its own words, in its second model after
    # torch._dynamo.reset() (which clears dynamo's compile callbacks, as the harness does)
    "cerr": (HEADER + """
ic.cpp.inject_relu_bug_TESTING_ONLY = "compile_error"
torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()))(torch.randn(4, 8))
torch._dynamo.reset()
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
try:
    torch.compile(m)(torch.randn(4, 8))
except Exception:
    import traceback; traceback.print_exc()
    print("benchmark: the compiled model did not build"); sys.exit(1)
""", "compile_error"),
    # the bug comes from the check's --config (see CONFIG), not from the program
    "rerr": (HEADER + """
torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh()))(torch.randn(4, 8))
torch._dynamo.reset()
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
torch.compile(m)(torch.randn(4, 8))
""", "runtime_error"),
    # two compiled functions, the second with a graph break: the relu is in the last of three
    # graphs, and only that one is miscompiled
    "two": (HEADER + """
ic.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
a = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())
def f(x):
    y = torch.sin(x) * 2
    print("graph break")
    return torch.relu(y) + 1
x = torch.randn(4, 8)
with torch.no_grad():
    out, ref = torch.compile(f)(torch.compile(a)(x)), f(a(x))
assert torch.allclose(out, ref, atol=1e-4), "compiled and eager differ"
""", "accuracy"),
}

# --config given to the check (the environment hook sets it in the program's process)
CONFIG = {"rerr": ["--config", "inductor.cpp.inject_relu_bug_TESTING_ONLY=runtime_error"]}

# programs that are not compiler failures: name -> (program, expected class, words in the reason)
NOT_COMPILER = {
    "nocompile": ("import sys\nprint('benchmark: wrong result'); sys.exit(1)\n", "runtime_error", "compiled no graph"),
    "eagerfail": (HEADER + """
def f(x):
    y = x.sin()
    if y.sum() > -1e9:
        raise ValueError("the model's own bug: bad shapes in the head")
    return y
torch.compile(f)(torch.randn(4))
""", "runtime_error", "fails without the compiler"),
    "hangs": ("import time\nwhile True: time.sleep(1)\n", "timeout", "timed out"),
    # a custom inductor pass runs before the graph compiler that repro_after=aot wraps
    "nograph": (HEADER + """
def bad_pass(graph):
    raise RuntimeError("custom pre-grad pass failed")
ic.pre_grad_custom_pass = bad_pass
torch.compile(lambda x: x.cos() + 1)(torch.randn(4))
""", "compile_error", "compiled no graph with inductor"),
    "setup": (HEADER + "import transformers_that_is_not_installed\n", "setup_error", "could not be set up"),
}


def _check(bot, tmp_path, name, source, *extra, timeout="300"):
    prog = tmp_path / f"{name}.py"
    prog.write_text(source)
    out = tmp_path / f"run-{name}"
    proc = bot("check", "--command", f"{sys.executable} {prog.name}", "--name", name, "--timeout", timeout,
               "--out", out, "--reruns", "0", *extra, cwd=tmp_path)
    doc = json.loads((out / "results.json").read_text())
    assert doc["settings"]["source"] == "command", proc.stderr
    return proc, doc


def _combined_run(tmp_path, docs, name="combined"):
    """One run directory holding the rows of several one-command checks, so that one `minify`
    process minifies them all (each check keeps its own id, command and working directory)."""
    run = tmp_path / name
    (run / "checks").mkdir(parents=True)
    doc = dict(docs[0], checks=[r for d in docs for r in d["checks"]])
    (run / "results.json").write_text(json.dumps(doc))
    return run


@pytest.mark.slow
def test_benchmark_programs_end_with_a_verified_repro_of_the_culprit_op(tmp_path, bot):
    (tmp_path / "repro.py").write_text("# the user's own repro\n")
    docs = []
    for name, (src, cls) in PROGRAMS.items():
        proc, doc = _check(bot, tmp_path, name, src, *CONFIG.get(name, []))
        row = doc["checks"][0]
        assert proc.returncode == 1, proc.stderr[-2000:]
        assert row["failure_class"] == cls, (name, row["status"], row.get("classified_by"), row["error"])
        assert row["compile_frames"] == {"cerr": 2, "rerr": 2, "two": 3}.get(name, 1), name
        docs.append(doc)
    run = _combined_run(tmp_path, docs)
    proc = bot("minify", "--out", run, "--verify-runs", "3", "--no-bisect", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-4000:]
    for name, (_, cls) in PROGRAMS.items():
        f = json.loads((run / "failures" / f"{name}-inductor-inference-float32-cpu" / "failure.json").read_text())
        r = f["repro"]
        assert (f["class"], f["stage"], r["status"]) == (cls, "inductor", "minimized"), (name, r["reason"])
        assert r["verification"]["failed_same_way"] == r["verification"]["runs"] == 3, name
        assert [g["op"] for g in r["graph"]] == ["aten.relu.default"], (name, r["graph"])
        # localize asks the stage before inductor first: it passes, and that one run settles it
        assert f["ablation"] == [{"backend": "aot_eager_decomp_partition", "status": "pass"},
                                 {"backend": "inductor", "status": f["check"]["status"]}], (name, f["ablation"])
        assert r["capture"]["method"] == "environment" and r["capture"]["repro_after"] == "aot"
        assert r["capture"]["repro_level"] == {"accuracy": 4, "compile_error": 2, "runtime_error": 3}[cls]
        assert {"key": "inductor.cpp.inject_relu_bug_TESTING_ONLY", "default": None,
                "value": {"acc": "accuracy", "two": "accuracy", "cerr": "compile_error",
                          "rerr": "runtime_error"}[name]} in (f["config"]["minimal"] or []), (name, f["config"])
        assert (run / "failures" / f["id"] / "repro.py").exists()
    two = json.loads((run / "failures" / "two-inductor-inference-float32-cpu" / "failure.json").read_text())
    assert (two["repro"]["capture"]["graph"], two["repro"]["capture"]["graphs"]) == (3, 3)
    # a graph that fails to compile is counted too, and so are the graphs before a reset()
    for name, graphs in (("cerr", (2, 2)), ("rerr", (2, 2)), ("acc", (1, 1))):
        one = json.loads((run / "failures" / f"{name}-inductor-inference-float32-cpu" / "failure.json").read_text())
        assert (one["repro"]["capture"]["graph"], one["repro"]["capture"]["graphs"]) == graphs, name
    assert (tmp_path / "repro.py").read_text() == "# the user's own repro\n", "torch's copy went to the program's dir"

    # the issue shows the program's command as configured, and which graph failed
    # the report is told the sweep's commands, as `run --command` and the action's `command` input tell it
    commands = [a for name in PROGRAMS for a in ("--command", f"{sys.executable} {name}.py")]
    proc = bot("report", "--out", run, "--tracker", "local", *commands, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    bodies = "\n".join(json.loads(p.read_text()).get("body") or "" for p in (run / "issues").glob("*.json"))
    # as configured, its interpreter's path made public (the venv is the runner's: bot/public.py)
    assert re.search(r"\S*python\S* (acc|cerr|rerr|two)\.py    # the program", bodies), bodies
    assert sys.executable not in bodies
    assert re.search(r"The failing graph is graph [123] of [123] the program compiled", bodies)


@pytest.mark.slow
def test_programs_that_are_not_compiler_failures_end_with_a_reason_and_no_repro(tmp_path, bot):
    docs = []
    for name, (src, cls, _) in NOT_COMPILER.items():
        _, doc = _check(bot, tmp_path, name, src, timeout="8" if name == "hangs" else "300")
        row = doc["checks"][0]
        assert row["failure_class"] == cls, (name, row["status"], row.get("classified_by"), row["error"])
        docs.append(doc)
    setup = docs[-1]["checks"][0]
    assert "transformers_that_is_not_installed" in setup["error"]["message"]
    run = _combined_run(tmp_path, docs)
    proc = bot("minify", "--out", run, "--verify-runs", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]   # nothing minified
    for name, (_, _, words) in NOT_COMPILER.items():
        fdir = run / "failures" / f"{name}-inductor-inference-float32-cpu"
        f = json.loads((fdir / "failure.json").read_text())
        assert f["repro"]["status"] in ("none", "not_reproduced") and f["repro"]["path"] is None, name
        assert words in f["repro"]["reason"], (name, f["repro"]["reason"])
        assert not (fdir / "repro.py").exists()
    eager = json.loads((run / "failures" / "eagerfail-inductor-inference-float32-cpu" / "failure.json").read_text())
    assert eager["stage"] == "eager" and eager["ablation"][0] == {"backend": "none", "status": "fail_to_run"}


def test_source_flags_select_their_source_or_are_refused(tmp_path, bot):
    ok = tmp_path / "ok.py"
    ok.write_text("print('fine')\n")
    proc = bot("check", "--command", f"{sys.executable} {ok}", "--out", tmp_path / "r1")
    doc = json.loads((tmp_path / "r1" / "results.json").read_text())
    assert proc.returncode == 0 and doc["settings"]["source"] == "command"
    assert [r["model"] for r in doc["checks"]] == ["command"]          # the command, not the zoo
    import torch  # the parent never imported it (it ran a program), yet it names its version

    assert (doc["versions"]["torch"], doc["versions"]["torch_git"]) == (torch.__version__, torch.version.git_version)
    for argv in (["check", "--suite", "zoo", "--command", "true"],
                 ["check", "--command", "true", "--pytorch", str(tmp_path)],
                 ["check", "--suite", "yaml", "--csv", "x.csv"],
                 ["check", "--suite", "command", "--command", "true", "--batch-size", "4"],
                 ["check", "--model-file", "m.yaml", "--harness-suite", "timm_models"],
                 ["check", "--accuracy-pattern", "differ"],
                 ["check", "--command", "true", "--error-pattern", "("],
                 ["run", "--suite", "zoo", "--name", "x"]):
        proc = bot(*argv, "--out", tmp_path / "refused")
        assert proc.returncode == 2, (argv, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"minify-bot {argv[0]}: error: "), (argv, proc.stderr)
        assert "Traceback" not in proc.stderr and "None" not in lines[0]
    assert not (tmp_path / "refused" / "results.json").exists()


def test_classifier_reads_the_common_ways_programs_report_a_mismatch():
    def cls(text, rc=1, **kw):
        return classify(returncode=rc, output=text, **kw).failure_class

    assert cls("AssertionError: Tensor-likes are not close!\n\nMismatched elements: 3 / 16") == "accuracy"
    assert cls("    assert torch.allclose(out, ref)\nAssertionError") == "accuracy"
    assert cls("accuracy mismatch between eager and compiled") == "accuracy"
    assert cls("cpu  relu_mlp  fail_accuracy") == "accuracy"
    assert cls("Accuracy failed for the AOT Autograd graph") == "accuracy"
    assert cls("max abs diff 1.08\nFAIL: compiled encoder layer differs from eager") == "accuracy"
    assert cls("ValueError: the checkpoint differs from the config") == "runtime_error"
    assert cls("RuntimeError: size mismatch for weight: copying a param with shape [4]") == "runtime_error"
    assert cls("torch._inductor.exc.InductorError: CppCompileError: C++ compile error\n"
               "/tmp/x.cpp:3:5: error: 'foo' was not declared in this scope") == "compile_error"
    assert cls("torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:\n"
               "LoweringException: NotImplementedError") == "compile_error"
    assert cls("OSError: We couldn't connect to 'https://huggingface.co' to load this file") == "setup_error"
    assert cls("ModuleNotFoundError: No module named 'timm'") == "setup_error"
    # a missing module *after* compiling is not a setup failure
    assert cls("ModuleNotFoundError: No module named 'triton'", compiled_graphs=2) == "runtime_error"
    assert cls("all good", rc=0) is None
    assert cls("", rc=-9) == "oom" and cls("", rc=-11) == "crash"
    assert cls("terminate called after throwing an instance of 'c10::Error'", rc=-6) == "runtime_error"
    assert classify(returncode=None, output="", timed_out=True, timeout=5).failure_class == "timeout"
    # the harness's CSV word decides what it says; the output explains
    assert cls("", rc=0, status_word="fail_accuracy") == "accuracy"
    assert cls("", rc=0, status_word="pass") is None
    # the user's own words come first
    p = Patterns(accuracy=[r"outputs differ by \d+"], error=[r"^FATAL"])
    assert cls("step 3: outputs differ by 12", patterns=p) == "accuracy"
    assert cls("FATAL: the kernel failed", patterns=p) == "runtime_error"
    row = classify(returncode=1, output="step 3: outputs differ by 12", patterns=p)
    assert "--accuracy-pattern" in row.classified_by


def test_the_hook_chains_to_an_existing_sitecustomize_and_loads_only_when_asked(tmp_path):
    import os
    import subprocess

    from bot.suites.command import hook_env
    from bot.torch_adapter.hook import read_state

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = '1'\n")
    state = tmp_path / "state.jsonl"
    env = dict(os.environ, PYTHONPATH=str(site))
    env.update(hook_env(str(state), base=env))
    code = "import os, sys; print(os.environ.get('USER_SITE_RAN'), 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["1", "False"]          # chained; torch not imported by the hook
    assert read_state(str(state)).graphs == read_state(str(state)).frames == 0  # the hook ran, nothing compiled
    assert read_state(str(tmp_path / "missing.jsonl")).graphs is None


@pytest.mark.slow
def test_the_hook_replaces_the_backend_of_every_compile_call(tmp_path):
    """What localize relies on: the program's own torch.compile(backend=...) is overridden."""
    import os
    import subprocess

    from bot.suites.command import hook_env
    from bot.torch_adapter.hook import read_state

    prog = tmp_path / "p.py"
    prog.write_text(textwrap.dedent("""
        import torch
        seen = []
        def my_backend(gm, example_inputs):
            seen.append("mine")
            return gm.forward
        def f(x):
            return x.sin() + 1
        g = torch.compile(f, backend=my_backend)
        g(torch.randn(3))
        print("same" if g is f else "compiled", seen)
        """))
    for forced, expect in ((None, "compiled ['mine']"), ("eager", "compiled []"), ("none", "same []")):
        state = tmp_path / f"state-{forced}.jsonl"
        env = dict(os.environ)
        env.update(hook_env(str(state), force_backend=forced, base=env))
        out = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True, timeout=300)
        assert out.stdout.strip() == expect, (forced, out.stdout, out.stderr[-2000:])
        assert read_state(str(state)).graphs == (0 if forced == "none" else 1), forced


@pytest.mark.slow
def test_a_yaml_file_of_commands_is_one_sweep_of_one_check_each(tmp_path, bot):
    (tmp_path / "progs").mkdir()
    (tmp_path / "progs" / "ok.py").write_text("print('fine')\n")
    (tmp_path / "bad.py").write_text("import sys\nprint('benchmark: crashed'); sys.exit(3)\n")
    cmds = tmp_path / "cmds.yaml"
    cmds.write_text(f"commands:\n  fine:\n    command: {sys.executable} ok.py\n    cwd: progs\n"
                    f"  broken: {sys.executable} bad.py\n")
    proc = bot("check", "--suite", "commands", "--command-file", cmds, "--list", cwd=tmp_path)
    assert proc.returncode == 0 and re.search(r"^fine\s+.*ok\.py$", proc.stdout, re.M), proc.stderr
    out = tmp_path / "run"
    proc = bot("check", "--command-file", cmds, "--out", out, "--reruns", "0", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]   # one of them failed
    doc = json.loads((out / "results.json").read_text())
    assert doc["settings"]["source"] == "commands"
    rows = {r["model"]: r for r in doc["checks"]}
    assert rows["fine"]["status"] == "pass" and rows["fine"]["spec"]["cwd"] == str(tmp_path / "progs")
    assert rows["broken"]["failure_class"] == "runtime_error" and rows["broken"]["spec"]["source"] == "command"
    cmds.write_text("fine: [unclosed\n")
    proc = bot("check", "--command-file", cmds, "--out", out, cwd=tmp_path)
    assert proc.returncode == 2 and f"malformed YAML in {cmds} at line 2" in proc.stderr, proc.stderr[-1000:]


def test_a_bad_command_file_is_refused_with_what_is_wrong(tmp_path):
    from bot.errors import UsageError
    from bot.suites import available

    cmds = tmp_path / "cmds.yaml"
    for text, words in (("fine: [unclosed\n", "malformed YAML in"), ("- a list\n", "expected a mapping"),
                        ("x:\n  command: ok.py\n  shell: bash\n", "unknown option(s) shell"),
                        ("x:\n  command: ok.py\n  cwd: nowhere\n", "does not exist"),
                        ("x: \"python 'unclosed\"\n", "cannot parse the command"),
                        ("x:\n  cwd: .\n", "'command' must be a non-empty string"),
                        ("'bad name': python x.py\n", "invalid command name")):
        cmds.write_text(text)
        with pytest.raises(UsageError, match=re.escape(words)):
            available("commands", file=str(cmds))
    with pytest.raises(UsageError, match="--command-file"):
        available("commands")


def test_a_compile_errors_traceback_is_the_python_one_and_its_diagnostics_are_in_the_message():
    out = ("[warmup] 0%|          | 0/1\n"
           "Traceback (most recent call last):\n"
           '  File "bench.py", line 3, in <module>\n    run()\n'
           "torch._inductor.exc.InductorError: CppCompileError: C++ compile error\n"
           "Command:\ng++ /tmp/k.cpp -o k.so\nOutput:\n"
           "/tmp/k.cpp:3:1: warning: unused variable 'tmp0'\n"
           "/tmp/k.cpp:9:5: error: 'relu' was not declared in this scope\n")
    row = classify(returncode=1, output=out)
    assert row.failure_class == "compile_error"
    tb = row.error.traceback
    assert tb.startswith("Traceback") and tb.endswith("CppCompileError: C++ compile error") and "warning" not in tb
    assert "error: 'relu' was not declared" in row.error.message


GPU_PROGRAM = """\
import json, os, sys
# the record the environment hook writes for a program whose graphs ran on a GPU (this machine has
# none): one training graph of bfloat16 tensors on cuda:0, compiled with TF32 on
with open(os.environ["MINIFY_BOT_HOOK_STATE"], "a") as fh:
    fh.write(json.dumps({"event": "compile", "graph": 1}) + "\\n")
    fh.write(json.dumps({"event": "graph", "graph": 1, "devices": ["cuda:0", "cpu"],
                         "dtypes": {"bfloat16": 4096, "int64": 16}, "grad": True,
                         "numerics": {"torch.backends.cuda.matmul.allow_tf32": True}}) + "\\n")
    fh.write(json.dumps({"event": "backward"}) + "\\n")
print("loss 0.5 vs fp64 0.25 (eager 0.2501): accuracy mismatch")
sys.exit(1)
"""


def test_every_record_of_a_program_names_the_device_dtype_and_mode_it_compiled(tmp_path, bot):
    """A program checked with the defaults (cpu, float32, inference) whose graphs were a bfloat16
    training graph on cuda:0 (the hook's record): the check id, the row, the issue's title, its
    affected table and the reproduce command say cuda, bfloat16 and training; the row keeps the
    program's own run time and the numerics flags it set."""
    from bot.tracker.local import LocalTracker

    (tmp_path / "prog.py").write_text(GPU_PROGRAM)
    p = bot("check", "--command", f"{sys.executable} prog.py", "--name", "gpuprog", "--reruns", "0",
            "--out", tmp_path / "out", cwd=tmp_path)
    assert p.returncode == 1, p.stderr[-3000:]
    (row,) = json.loads((tmp_path / "out" / "results.json").read_text())["checks"]
    assert row["id"] == "gpuprog-inductor-training-bfloat16-cuda"
    assert (row["device"], row["dtype"], row["mode"]) == ("cuda", "bfloat16", "training")
    assert row["program_s"] > 0 and row["numerics"] == {"torch.backends.cuda.matmul.allow_tf32": True}
    p = bot("report", "--out", tmp_path / "out", "--issues-dir", tmp_path / "issues", "--no-dashboard", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    (issue,) = LocalTracker(tmp_path / "issues").records()
    assert issue["title"].endswith("(bfloat16, cuda)") and "cpu" not in issue["title"]
    assert "--mode training --dtype bfloat16 --device cuda" in issue["body"]
    assert "float32" not in issue["body"] and "inference" not in issue["body"]


def test_a_program_that_compiles_with_aot_eager_is_an_aot_eager_check(tmp_path, bot):
    """The settings say inductor; the program passes backend="aot_eager" to torch.compile: the
    check is named and reproduced with the backend the program used (localize then asks only
    whether eager fails before it)."""
    (tmp_path / "prog.py").write_text(
        "import sys, torch\n"
        "m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())\n"
        "out = torch.compile(m, backend='aot_eager')(torch.randn(4, 8))\n"
        "print('wrong result: max abs error 1.0 (accuracy mismatch)')\n"
        "sys.exit(1)\n")
    p = bot("check", "--command", f"{sys.executable} prog.py", "--name", "aotprog", "--reruns", "0",
            "--out", tmp_path / "out", cwd=tmp_path)
    assert p.returncode == 1, p.stderr[-3000:]
    (row,) = json.loads((tmp_path / "out" / "results.json").read_text())["checks"]
    assert (row["id"], row["backend"]) == ("aotprog-aot_eager-inference-float32-cpu", "aot_eager"), row
    assert (tmp_path / "out" / "checks" / "aotprog-aot_eager-inference-float32-cpu.log").exists()


@pytest.mark.slow
def test_a_program_that_compiles_with_eager_and_fails_without_it_is_localized_to_eager(tmp_path, bot):
    """backend="eager" leaves no debug backend to try before it: the run without torch.compile
    still says the program fails without the compiler (stage eager, not minified)."""
    _, doc = _check(bot, tmp_path, "eagerprog", HEADER + "def f(x):\n    return torch.ones(3)[torch.tensor([7])] + x\n"
                    "torch.compile(f, backend='eager')(torch.randn(1))\n")
    (row,) = doc["checks"]
    assert (row["id"], row["failure_class"]) == ("eagerprog-eager-inference-float32-cpu", "runtime_error"), row
    run = tmp_path / "run-eagerprog"
    proc = bot("minify", "--out", run, "--verify-runs", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    f = json.loads((run / "failures" / row["id"] / "failure.json").read_text())
    assert f["stage"] == "eager" and f["ablation"][0] == {"backend": "none", "status": "fail_to_run"}, f["ablation"]


@pytest.mark.slow
def test_a_matrix_over_a_program_that_ignores_it_keeps_one_id_per_check(tmp_path, bot):
    """A program that compiles with inductor whatever MINIFY_BOT_BACKEND says, checked over a
    backend matrix: both rows compiled the same thing. The first may not take the id the second was
    given (two rows of one id make the run directory unreadable, and the second's log would be
    written over the first's): each keeps the id of its settings, and its own log."""
    (tmp_path / "prog.py").write_text("import torch\nprint(torch.compile(lambda x: x.cos())(torch.randn(4)).shape)\n")
    p = bot("check", "--command", f"{sys.executable} prog.py", "--name", "fixed", "--matrix",
            "backend=aot_eager,inductor", "--reruns", "0", "--out", tmp_path / "out", cwd=tmp_path)
    assert p.returncode == 0, p.stderr[-3000:]
    rows = json.loads((tmp_path / "out" / "results.json").read_text())["checks"]
    assert [(r["id"], r["backend"]) for r in rows] == [("fixed-aot_eager-inference-float32-cpu", "inductor"),
                                                        ("fixed-inductor-inference-float32-cpu", "inductor")]
    assert sorted(r["log"] for r in rows) == sorted(f"checks/{r['id']}.log" for r in rows)
    assert all((tmp_path / "out" / r["log"]).exists() for r in rows)


def test_a_retry_request_names_a_program_by_what_it_compiled_and_its_log_is_named_so(tmp_path, bot):
    """The dashboard's retry box names the check by its row's id, which for a program is what it
    compiled (here cuda, bfloat16, training; the settings say cpu, float32, inference): the ticked
    box reruns the check, as one naming the settings' id does, and the logs carry the row's id."""
    (tmp_path / "prog.py").write_text(GPU_PROGRAM)
    observed, given = "gpuprog-inductor-training-bfloat16-cuda", "gpuprog-inductor-inference-float32-cpu"
    for k, retry in enumerate((observed, given)):
        out = tmp_path / f"out{k}"
        p = bot("check", "--command", f"{sys.executable} prog.py", "--name", "gpuprog", "--reruns", "0",
                "--retry", retry, "--out", out, cwd=tmp_path)
        assert p.returncode == 1, p.stderr[-3000:]
        (row,) = json.loads((out / "results.json").read_text())["checks"]
        assert row["id"] == observed and row.get("reruns") == 1 and row.get("deterministic"), (retry, row)
        assert "rerun 1 of 3" in p.stderr
        assert row["log"] == f"checks/{observed}.log" and (out / row["log"]).is_file()
        logs = sorted(f.name for f in (out / "checks").glob("*.log"))
        assert logs == [f"{observed}.log", f"{observed}.rerun1.log"], logs
    # no retry requested: no rerun
    p = bot("check", "--command", f"{sys.executable} prog.py", "--name", "gpuprog", "--reruns", "0",
            "--retry", "gpuprog-inductor-training-float32-cuda", "--out", tmp_path / "none", cwd=tmp_path)
    (row,) = json.loads((tmp_path / "none" / "results.json").read_text())["checks"]
    assert not row.get("reruns") and "rerun" not in p.stderr


STATE_PROGRAM = HEADER + """
# the program's own settings, in code: a compiler setting (the bug) and global numerics flags
ic.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"
torch.backends.cuda.matmul.allow_tf32 = True
torch.set_float32_matmul_precision("high")
torch.use_deterministic_algorithms(True, warn_only=True)
m = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 4))
x = torch.randn(4, 8)
with torch.no_grad():
    torch.testing.assert_close(torch.compile(m)(x), m(x))
"""


# the same, the bug's setting given to torch.compile (inductor sets it only while it compiles: no
# launcher or captured graph carries it)
OPTIONS_PROGRAM = STATE_PROGRAM.replace('ic.cpp.inject_relu_bug_TESTING_ONLY = "accuracy"\n', "").replace(
    "torch.compile(m)", 'torch.compile(m, options={"cpp.inject_relu_bug_TESTING_ONLY": "accuracy", '
                        '"epilogue_fusion": False})')


@pytest.mark.slow
@pytest.mark.parametrize("program", [STATE_PROGRAM, OPTIONS_PROGRAM], ids=["in-code", "compile-options"])
def test_a_graph_is_judged_with_the_settings_and_numerics_the_program_set(tmp_path, bot, program):
    """A program that sets a compiler setting and global numerics flags in its own code (nothing
    on the command line), the setting as a config assignment or as ``torch.compile(options=...)``:
    its graph is minified and verified under both, and the repro carries the setting and the few
    lines that set the flags."""
    assert program.count("inject_relu_bug_TESTING_ONLY") == 1
    (tmp_path / "prog.py").write_text(program)
    p = bot("run", "--command", f"{sys.executable} prog.py", "--name", "state", "--out", tmp_path / "out",
            "--issues-dir", tmp_path / "issues", "--verify-runs", "2", "--no-bisect", "--budget", "240",
            cwd=tmp_path, env={"GITHUB_TOKEN": "", "GITHUB_REPOSITORY": ""})
    assert p.returncode == 1, p.stderr[-4000:]
    (fdir,) = [d for d in (tmp_path / "out" / "failures").iterdir() if d.is_dir()]
    rec = json.loads((fdir / "failure.json").read_text())
    assert rec["repro"]["status"] == "minimized", rec["repro"]
    assert rec["repro"]["verification"]["failed_same_way"] == 2
    assert [d["key"] for d in rec["config"]["minimal"]] == ["inductor.cpp.inject_relu_bug_TESTING_ONLY"]
    (row,) = json.loads((tmp_path / "out" / "results.json").read_text())["checks"]
    assert row.get("compile_options") == ({"inductor.cpp.inject_relu_bug_TESTING_ONLY": "accuracy",
                                           "inductor.epilogue_fusion": False} if "options=" in program else None)
    repro = (fdir / "repro.py").read_text()
    for line in ("torch.backends.cuda.matmul.allow_tf32 = True", "torch.set_float32_matmul_precision('high')",
                 "torch.use_deterministic_algorithms(True, warn_only=True)"):
        assert line in repro


def test_a_command_line_with_shell_syntax_runs_as_a_workflow_run_line_would(tmp_path, bot):
    """``cd bench && STEPS=3 python run.py 2>&1``, as a workflow's ``run:`` line or a terminal would run
    it (not exec'd as a program named ``cd``); a crash under the shell is still the program's crash."""
    bench = tmp_path / "bench"
    (bench / "data").mkdir(parents=True)
    (bench / "data" / "scale.txt").write_text("1.5\n")
    (bench / "run.py").write_text(textwrap.dedent("""
        import os, sys
        scale = float(open("data/scale.txt").read())
        print(f"steps {os.environ['STEPS']} scale {scale}: compiled output differs from eager", file=sys.stderr)
        sys.exit(1)
    """))
    out = tmp_path / "run"
    bot("check", "--command", f"cd bench && STEPS=3 {sys.executable} run.py 2>&1 | cat; exit ${{PIPESTATUS[0]}}",
        "--reruns", "0", "--out", out, cwd=tmp_path)
    row = json.loads((out / "results.json").read_text())["checks"][0]
    assert (row["status"], row["failure_class"]) == ("fail_accuracy", "accuracy"), row
    assert "steps 3 scale 1.5" in (out / "checks" / f"{row['id']}.log").read_text()
    # (``&& echo``: bash must wait for the program rather than exec it, and reports the abort as 134)
    bot("check", "--command", f"cd bench && {sys.executable} -c 'import os; os.abort()' && echo done",
        "--reruns", "0", "--out", out, cwd=tmp_path)
    row = json.loads((out / "results.json").read_text())["checks"][0]
    assert (row["failure_class"], row["error"]["type"]) == ("crash", "SIGABRT"), row

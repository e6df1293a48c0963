"""bot/torch_adapter/hook.py's events: what the environment hook writes inside a program (the state
file, one HookEvent a line) and how minify-bot reads it back (bounded: the program is untrusted)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest

from bot.records import Launcher
from bot.suites.command import hook_env
from bot.torch_adapter import hook

EVENTS = [hook.Started(pid=41), hook.Compiling(graph=2), hook.Exited(graphs=3, isa="avx2"),
          hook.Exited(graphs=None), hook.LauncherKept(graph=None, path="/tmp/l.py"),
          hook.Forced(backend="eager"), hook.ConfigSet(keys=["dynamo.verbose"]),
          hook.Unsupported(what="torch._dynamo.optimize"),
          hook.GraphFacts(graph=1, devices=["cuda:0", "cpu"], dtypes={"bfloat16": 4096, "int64": 8}, grad=True,
                          autocast=None, numerics={"torch.backends.cuda.matmul.allow_tf32": True},
                          options={"inductor.max_autotune": True,
                                   "inductor.cpp.inject_relu_bug_TESTING_ONLY": "accuracy",
                                   "inductor.compile_threads": 1, "inductor.fallback_random": None}),
          hook.BackwardRan()]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_every_event_reads_back_as_written(event):
    line = json.dumps(event.to_json())
    assert json.loads(line)["event"] == event.KIND
    assert hook.parse_event(line) == event


@pytest.fixture
def state(tmp_path, monkeypatch):
    """A fresh hook state, its events going to tmp_path/state.jsonl."""
    path = tmp_path / "state.jsonl"
    monkeypatch.setenv("MINIFY_BOT_HOOK_STATE", str(path))
    monkeypatch.setattr(hook, "_STATE", {"graphs": 0, "launchers": 0, "done": set(), "dumping": 0, "at_dump": None,
                                         "extra": 0, "compiling": False, "produced": 0, "at_start": None,
                                         "own_count": True})
    return path


def test_what_the_hook_writes_in_a_program_is_what_read_state_reports(state, tmp_path, monkeypatch):
    """The hook's own writers (forcing a backend, keeping a launcher, a --config it cannot apply),
    on stand-ins of torch's modules, read back by read_state."""
    dynamo = types.SimpleNamespace(optimize=lambda *a, **k: "compiled")
    hook._force_backend(dynamo, "aot_eager")
    after_aot = types.SimpleNamespace(helper_for_dump_minify=lambda contents: "dumped")
    monkeypatch.setenv("MINIFY_BOT_LAUNCHER_DIR", str(tmp_path / "launchers"))
    hook._keep_launchers(after_aot)
    hook._STATE["produced"] = 2   # two graphs so far: a dump now belongs to graph 2
    assert after_aot.helper_for_dump_minify("print('launcher')\n") == "dumped"
    monkeypatch.setenv(hook.CONFIG_ENV, "{not json")
    hook._apply_config()
    got = hook.read_state(str(state))
    launcher = str(tmp_path / "launchers" / "launcher_001_graph2.py")
    assert got.forced == "aot_eager" and got.launchers == [Launcher(graph=2, path=launcher)]
    assert open(launcher).read() == "print('launcher')\n"
    assert len(got.unsupported) == 1 and got.unsupported[0].startswith("--config in the program: ValueError")
    assert got.graphs is None   # no hook loaded in a program process: counting unknown
    assert [type(e) for e in hook.read_events(str(state))] == [hook.Forced, hook.LauncherKept, hook.Unsupported]


def test_lines_that_are_not_events_are_skipped(state):
    """Malformed, too deep, of an unknown kind or with a value of the wrong type (a graph "x" once
    stopped read_state with a ValueError): skipped; the well-formed events around them count."""
    good = [hook.Started(pid=1), hook.Compiling(graph=1), hook.LauncherKept(graph=3, path="/l.py"),
            hook.Exited(graphs=2, isa="x" * 100)]
    junk = ["not json", "[1]", '{"event": 3}', '{"event": "later-kind", "graph": 9}',
            '{"event": "compile", "graph": "x"}', '{"event": "compile", "graph": true}',
            '{"event": "exit", "graphs": [5]}', '{"event": "launcher", "graph": 7}',
            '{"event": "unsupported", "what": {"graph counting": 1}}',
            '{"event": "compile", "graph": ' + "[" * 80 + "]" * 80 + "}"]
    lines = [json.dumps(e.to_json()) for e in good]
    state.write_text("\n".join([lines[0], *junk[:5], lines[1], lines[2], *junk[5:], lines[3]]) + "\n")
    with open(state, "ab") as fh:   # a line that is not UTF-8, and a last line cut short
        fh.write(b'{"event": "forced", "backend": "\xff"}\n{"event": "exi')
    assert hook.read_events(str(state)) == good
    assert hook.read_state(str(state)) == hook.HookState(graphs=3, frames=3, launchers=[Launcher(3, "/l.py")],
                                                         forced=None, unsupported=[], isa="x" * 40)
    assert hook.read_events(str(state.parent / "missing.jsonl")) == []


def test_the_start_line_a_program_writes_is_a_started_event(tmp_path):
    """The environment hook's own writer (bot/suites/hook/sitecustomize.py, which imports nothing
    of minify-bot and writes its line by hand) in a real program, read back as a Started event."""
    state = tmp_path / "state.jsonl"
    env = dict(os.environ)
    env.update(hook_env(str(state), base=env))
    out = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], env=env, capture_output=True,
                         text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert hook.read_events(str(state)) == [hook.Started(pid=int(out.stdout))]
    got = hook.read_state(str(state))
    assert (got.graphs, got.frames) == (0, 0)


def test_the_config_overrides_the_hook_applies_are_named_in_a_config_event(state, monkeypatch):
    import torch._dynamo.config as dynamo_config

    for name, value in hook.config_env({"dynamo.verbose": "true"}).items():   # what the check sets
        monkeypatch.setenv(name, value)
    # restored by the config module's own patch: monkeypatch's undo would hide the entry (a
    # config module's delattr), and every later compile in this process would fail
    with dynamo_config.patch(verbose=dynamo_config.verbose):
        hook._apply_config()
        assert dynamo_config.verbose is True
    assert hook.read_events(str(state)) == [hook.ConfigSet(keys=["dynamo.verbose"])]


def test_a_gpu_programs_graphs_name_its_device_dtype_and_mode(state):
    """What a GPU program's graphs were (a record naming cuda:0, with a CPU scalar beside it, as
    the hook writes one on a GPU runner): the program's configuration is cuda, the dtype of most of
    its elements, and training once any graph was compiled for a backward. Numerics flags are
    checked against the table (the program wrote them): an unknown flag or a value it cannot take
    is dropped."""
    facts = [hook.GraphFacts(graph=1, devices=["cuda:0", "cpu"], dtypes={"float16": 2048, "float32": 1}, grad=False,
                             numerics={"torch.backends.cuda.matmul.allow_tf32": True, "os.system": True,
                                       "default_dtype": "float64; import os"}),
             hook.GraphFacts(graph=2, devices=["cuda:0"], dtypes={"float16": 100, "int64": 64}, grad=True,
                             numerics={"torch.backends.cuda.matmul.allow_tf32": True,
                                       "float32_matmul_precision": "high"})]
    state.write_text("".join(json.dumps(f.to_json()) + "\n" for f in facts + [hook.BackwardRan()]))
    got = hook.read_state(str(state))
    assert got.devices == ["cuda:0", "cpu"] and got.dtypes == {"float16": 2148, "float32": 1, "int64": 64}
    assert got.configuration() == {"device": "cuda", "dtype": "float16", "mode": "training"}
    assert got.numerics == {"torch.backends.cuda.matmul.allow_tf32": True, "float32_matmul_precision": "high"}
    # under autocast the program's dtype is amp; a program that compiled nothing names nothing
    state.write_text(json.dumps(facts[0].replace(autocast="bfloat16").to_json()) + "\n")
    assert hook.read_state(str(state)).configuration() == {"device": "cuda", "dtype": "amp", "mode": "inference"}
    assert hook.HookState().configuration() == {}
    # a graph compiled with grad enabled, but no backward ever ran: a forward-only program (no no_grad)
    state.write_text(json.dumps(facts[1].to_json()) + "\n")
    assert hook.read_state(str(state)).configuration()["mode"] == "inference"


def test_the_backend_a_program_compiles_with_is_its_checks_when_every_graph_names_the_same(state):
    """A program that compiles with backend="aot_eager" is an aot_eager check; graphs compiled by
    two backends, or one by a function of the program's own (registered under no name), leave the
    settings' backend; a name that is no backend name (the program wrote the record) is none."""
    def backends(*names):
        state.write_text("".join(json.dumps(hook.GraphFacts(graph=k, devices=["cpu"], dtypes={"float32": 4},
                                                            backend=name).to_json()) + "\n"
                                 for k, name in enumerate(names, 1)))
        return hook.read_state(str(state)).configuration().get("backend")

    assert backends("aot_eager", "aot_eager") == "aot_eager"
    assert backends("aot_eager", "inductor") is None
    assert backends("aot_eager", None) is None
    assert backends("inductor; rm -rf /") is None and backends("module:function") is None


PROGRAM = """\
import torch
torch.backends.cuda.matmul.allow_tf32 = True
torch.set_float32_matmul_precision("high")
torch.use_deterministic_algorithms(True, warn_only=True)
m = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to(torch.bfloat16)
x = torch.randint(0, 255, (8, 16), dtype=torch.uint8)
f = torch.compile(lambda x: m(x.to(torch.bfloat16) / 255), backend="eager")
f(x).sum().backward()
"""


def test_a_program_records_what_it_compiled_and_the_numerics_it_set(tmp_path):
    """A real program (dynamo with the eager backend: nothing is compiled to code) that trains a
    bfloat16 model on uint8 input and sets TF32, matmul precision and deterministic algorithms: the
    hook records the graph's device, dtypes and backward, and the flags that differ from torch's
    defaults, at the point dynamo hands the graph to its backend."""
    state = tmp_path / "state.jsonl"
    (tmp_path / "prog.py").write_text(PROGRAM)
    env = dict(os.environ)
    env.update(hook_env(str(state), base=env))
    out = subprocess.run([sys.executable, "prog.py"], env=env, capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    got = hook.read_state(str(state))
    assert got.devices == ["cpu"] and set(got.dtypes) == {"uint8", "bfloat16"}
    # the program compiles with backend="eager": its check is an eager check, not the settings' inductor
    assert got.configuration() == {"device": "cpu", "dtype": "bfloat16", "mode": "training", "backend": "eager"}
    assert got.numerics == {"torch.backends.cuda.matmul.allow_tf32": True, "float32_matmul_precision": "high",
                            "deterministic_algorithms": "warn_only"}
    assert got.isa is None   # nothing compiled C++: the exit probes no vector ISA (seconds on a small machine)


def test_the_settings_a_programs_torch_compile_gives_inductor_are_recorded_as_overrides():
    """``torch.compile(m, mode="max-autotune", options={...})``: inductor applies those settings only
    while it compiles, so the hook reads them off the compiler dynamo calls (torch.compile's inductor
    wrapper keeps them as ``config``, under dynamo's debug wrappers), as ``inductor.<key>`` overrides
    this torch's config accepts; a custom pass (a callable) or an unknown key is not carried."""
    wrapper = types.SimpleNamespace(compiler_name="inductor", config={
        "max_autotune": True, "cpp.inject_relu_bug_TESTING_ONLY": "accuracy", "post_grad_custom_post_pass": print,
        "no_such_setting": 1, "compile_threads": "many"})
    wrapped = types.SimpleNamespace(_torchdynamo_orig_backend=wrapper)
    assert hook.compile_options(wrapped) == {"inductor.max_autotune": True,
                                             "inductor.cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}
    assert hook.compile_options(types.SimpleNamespace(compiler_name="aot_eager", config={"max_autotune": True})) == {}
    assert hook.compile_options(print) == {} and hook.compile_options(None) == {}


def test_compile_options_in_a_record_are_bounded_and_merged_over_the_graphs(state):
    """The program writes the record: keys that are no inductor setting's, long text and more than
    32 keys are dropped; what two graphs were compiled with is merged (the later graph's value wins)."""
    many = {f"inductor.k{i}": i for i in range(40)}
    lines = [hook.GraphFacts(graph=1, devices=["cpu"], dtypes={"float32": 4},
                             options={"inductor.max_autotune": False, "dynamo.verbose": True,
                                      "inductor.x; rm -rf /": 1, "inductor.long": "x" * 201}),
             hook.GraphFacts(graph=2, devices=["cpu"], dtypes={"float32": 4},
                             options={"inductor.max_autotune": True, "inductor.epilogue_fusion": False})]
    state.write_text("".join(json.dumps(ev.to_json()) + "\n" for ev in lines))
    assert hook.read_state(str(state)).options == {"inductor.max_autotune": True, "inductor.epilogue_fusion": False}
    assert len(hook.valid_options(many)) == 32 and hook.valid_options(["inductor.x"]) == {}

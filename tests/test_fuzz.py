"""The fuzzer (bot/fuzz/) and ``--suite fuzz``: programs generated from (seed, index), valid eagerly,
judged against a float64 reference that drops the program's own casts. Fast tier: these tests run
programs eagerly and list checks; nothing is compiled (test_fuzz_e2e.py compiles)."""

from __future__ import annotations

import json
import re

import pytest
import torch

from bot.commands.check import select_models
from bot.fuzz import generate as gen
from bot.fuzz.leaves import DTYPES
from bot.fuzz.program import build, load, source
from bot.options import CheckOptions
from bot.torch_adapter import runtime as rt

SEED = 0
SAMPLE = range(16)


@pytest.fixture(scope="module")
def programs():
    return {k: gen.generate(SEED, k) for k in SAMPLE}


def _module(program):
    model = load(program)["Program"]()
    return model, model.example_inputs


def _flat(out):
    return list(out) if isinstance(out, (list, tuple)) else [out]


def test_the_same_seed_and_index_give_the_same_program_and_inputs(programs):
    again = gen.generate(SEED, 3)
    assert source(again) == source(programs[3])
    (m1, in1, _), (m2, in2, _) = build(gen.program_name(SEED, 3)), build(gen.program_name(SEED, 3))
    for a, b in zip(in1, in2):
        assert a.dtype == b.dtype and a.stride() == b.stride() and torch.equal(a, b)
    for (n1, p1), (n2, p2) in zip(m1.named_parameters(), m2.named_parameters()):
        assert n1 == n2 and torch.equal(p1, p2)
    assert len({source(p) for p in programs.values()}) == len(programs)   # different indices, different programs


def test_a_check_name_is_its_seed_and_index():
    name = gen.program_name(12, 345)
    assert name == "fuzz-s12-i000345" and gen.parse_name(name) == (12, 345)
    assert gen.parse_name("mlp_relu") is None and gen.parse_name("fuzz-s1-i12") is None


def test_programs_reach_every_dtype_and_layout_and_many_op_families(programs):
    leaves = [leaf for p in programs.values() for leaf in p.leaves]
    dtypes = {leaf.dtype for leaf in leaves}
    layouts = {leaf.layout for leaf in leaves}
    families = {f.split(":")[0] for p in programs.values() for f in p.features}
    assert dtypes == set(DTYPES), set(DTYPES) - dtypes
    assert {"contiguous", "transposed", "expanded", "sliced", "offset"} <= layouts
    assert len(families) >= 20, families


def test_programs_are_short_and_spend_their_steps_where_inductor_bugs_were(programs):
    """Short programs compile fast and minify small; their steps go to reductions, integer and floor
    division, casts and mixed-dtype arithmetic more than to convolutions and pooling. (A proportion,
    so judged over more programs than the shared sample.)"""
    programs = {**programs, **{k: gen.generate(SEED, k) for k in range(len(SAMPLE), 64)}}
    steps = [len(p.steps) for p in programs.values()]
    assert all(2 <= n <= 8 for n in steps) and sum(n <= 6 for n in steps) >= 0.75 * len(steps), steps
    families = [f.split(":")[0] for p in programs.values() for f in p.features]
    hot = sum(f.startswith(("reduce", "argreduce", "scan", "int_", "float_floordiv", "cast", "binary"))
              for f in families)
    big = sum(f in ("conv", "pool", "matmul", "inplace") for f in families)
    assert hot >= 0.4 * len(families) and big <= 0.15 * len(families), (hot, big, len(families))
    narrow = [leaf for p in programs.values() for leaf in p.leaves
              if leaf.dtype in ("uint8", "int8", "int16", "float16", "bfloat16")]
    assert len(narrow) >= 0.3 * sum(len(p.leaves) for p in programs.values())


def test_a_fuzz_check_compiles_without_a_worker_pool_unless_config_says_otherwise():
    """The check's child compiles the program's few kernels itself (a pool of compile workers would be
    started for every check); a --config of the run still wins."""
    from bot.records import Spec
    from bot.suites import source_of

    base = source_of(Spec(source="fuzz", model=gen.program_name(0, 1))).check_config
    assert base == {"inductor.compile_threads": 1}
    assert source_of(Spec(source="zoo", model="mlp_relu")).check_config == {}


def test_every_program_runs_forward_and_backward_eagerly_with_finite_results(programs):
    for k in SAMPLE:
        model, inputs = _module(programs[k])
        out = _flat(model(*inputs))
        for o in out:
            assert o.numel() > 0
            if o.is_floating_point():
                assert torch.isfinite(o).all(), k
        loss = sum(o.sum() / o.numel() for o in out if o.requires_grad)
        loss.backward()
        assert any(p.grad is not None for p in model.parameters()), k


class _Dtypes(torch.utils._python_dispatch.TorchDispatchMode):
    """The dtypes of every tensor the ops under it produce."""

    def __init__(self):
        super().__init__()
        self.seen = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        for t in _flat(result):
            if isinstance(t, torch.Tensor):
                self.seen.add(t.dtype)
        return result


def test_the_fp64_reference_runs_the_whole_program_in_float64_and_keeps_integer_results(programs):
    """The judge casts the module and its float inputs to float64; the program's own narrowing casts
    (to float16, bfloat16, float32) follow, and an integer tensor that meets a Python float (whose
    result is torch's default dtype) is float64 too, so no float of the reference is narrower than
    float64."""
    from bot.check.judge import fp64_reference
    from bot.check.settings import Settings
    from bot.records import Spec
    from bot.suites import source_of

    narrowing = [k for k, p in programs.items()
                 if any(f"f(torch.{d})" in s for s in p.steps for d in ("float16", "bfloat16", "float32"))]
    assert narrowing, "the sample should hold programs that cast to a narrower float"
    scalar = [k for k, p in programs.items() if any(re.search(r"(?<![\w.])-?\d+\.\d+", s) for s in p.steps)]
    assert scalar, "the sample should hold programs where a tensor meets a Python float"
    wide = source_of(Spec(source="fuzz", model=gen.program_name(SEED, 0))).reference_default_dtype
    for k in sorted(set(narrowing) | set(scalar)):
        model, inputs = _module(programs[k])
        out = _flat(model(*inputs))
        assert fp64_reference(model, inputs, Settings(), wide) is not None   # the judge's runs
        m64, in64 = rt.cast_to(torch.float64, model, inputs)
        dtypes = _Dtypes()
        with rt.default_dtype(wide), dtypes, torch.no_grad():
            ref = _flat(m64(*in64))
        seen = dtypes.seen
        assert not seen & {torch.float16, torch.bfloat16, torch.float32}, (k, seen)
        assert torch.get_default_dtype() == torch.float32        # as it was
        for o, r in zip(out, ref):
            if o.is_floating_point():
                assert r.dtype == torch.float64
            else:
                assert torch.equal(o, r), k   # integer and bool results: exactly the program's


def _state_with(dtype: str, values: str, shape=(4, 4)):
    st = gen._State(0, 0, 0)
    leaf = st.add_leaf(dtype=dtype, shape=shape, param=False)
    return st, leaf


def _keep(st, op, code_of):
    """Run one step the generator's way; the variable it keeps, or None when it rejects the step."""
    from bot.fuzz.ops import Op

    out = st.new_name("v")
    operands = [v for v in st.vars if v.name in code_of]
    code = f"{out} = {code_of}"
    try:
        val, wide = gen._run(st, code, operands, out)
        return gen._judge_step(st, Op("t", (), code_of, op), operands, out, code, val, wide)
    except gen.Rejected:
        return None


def test_undefined_behaviour_and_rounding_dependent_steps_are_not_kept():
    st, x = _state_with("int8", "ints")
    assert _keep(st, "", f"{x.name} // 3") is not None            # floor division: defined, kept
    assert _keep(st, "", f"{x.name} << 4") is None                 # int8 overflow: not kept
    assert _keep(st, "", f"{x.name} * 100") is None                # int8 overflow: not kept
    st, y = _state_with("float32", "randn")
    assert _keep(st, "", f"{y.name}.to(f(torch.uint8))") is None   # a negative float to uint8 (UB): not kept
    assert _keep(st, "", f"{y.name}.abs().to(f(torch.int16))") is not None
    assert _keep(st, "D", f"torch.floor({y.name})") is not None    # floor of an input: exact, kept
    noisy = _keep(st, "", f"torch.sin({y.name}) * 1000.3")
    assert noisy is not None and not noisy.exact
    st.vars.append(noisy)
    # a compare on a computed float that sits on a tie flips with the compiler's rounding: not kept
    assert _keep(st, "D", f"{noisy.name} == {noisy.name}.roll(1, 0)") is not None   # no tie: stable
    on_integers = _keep(st, "", f"torch.round({y.name}) + torch.sin({y.name}) * 0")   # computed, on a tie
    assert on_integers is not None and not on_integers.exact
    st.vars.append(on_integers)
    assert _keep(st, "D", f"torch.floor({on_integers.name})") is None
    assert _keep(st, "D", f"{on_integers.name} >= 0") is None
    assert _keep(st, "", f"torch.exp({y.name} * 100)") is None      # overflow to inf: not kept


def test_fuzz_checks_are_listed_by_seed_count_and_shard(bot, tmp_path):
    proc = bot("check", "--suite", "fuzz", "--seed", "7", "--fuzz-count", "5", "--list")
    assert proc.returncode == 0, proc.stderr
    names = [line.split()[0] for line in proc.stdout.splitlines()]
    assert names == [gen.program_name(7, k) for k in range(5)]
    shards = []
    for i in (1, 2):
        opts = CheckOptions(suite="fuzz", seed=7, fuzz_count=5, shard=f"{i}/2").resolved()
        shards.append([m.name for m in select_models(opts)[0]])
    assert sorted(shards[0] + shards[1]) == names and not set(shards[0]) & set(shards[1])


@pytest.mark.parametrize("args, says", [
    (("--suite", "fuzz"), "--fuzz-count N or --fuzz-time"),
    (("--suite", "fuzz", "--fuzz-count", "0"), "--fuzz-count must be a positive integer"),
    (("--suite", "fuzz", "--fuzz-time", "-5"), "--fuzz-time must be a positive number"),
    (("--suite", "fuzz", "--seed", "-1", "--fuzz-count", "2"), "--seed must be a non-negative"),
    (("--suite", "zoo", "--fuzz-count", "2"), "does not apply to --suite zoo"),
    (("--suite", "fuzz", "--models", "mlp_relu"), "not a fuzz program name: 'mlp_relu'"),
])
def test_bad_fuzz_options_are_usage_errors(bot, tmp_path, args, says):
    proc = bot("check", "--out", tmp_path / "out", *args, "--list")
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr


def test_a_finding_is_checked_again_by_its_name(bot):
    proc = bot("check", "--suite", "fuzz", "--models", "fuzz-s3-i000042,fuzz-s9-i000001", "--list")
    assert proc.returncode == 0, proc.stderr
    assert [line.split()[0] for line in proc.stdout.splitlines()] == ["fuzz-s3-i000042", "fuzz-s9-i000001"]


def test_the_program_of_a_check_is_printed_by_its_seed_and_index(tmp_path):
    import subprocess
    import sys

    text = subprocess.run([sys.executable, "-m", "bot.fuzz.program", "4", "2"], capture_output=True, text=True,
                          check=True).stdout
    assert text == source(gen.generate(4, 2))
    assert "fuzz-s4-i000002" in text and "python -m bot.fuzz.program 4 2" in text
    (tmp_path / "p.py").write_text(text)
    ran = subprocess.run([sys.executable, str(tmp_path / "p.py")], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr          # the program alone runs: `import torch` only


def test_the_campaign_summary_counts_verdicts_and_coverage():
    from bot.fuzz.campaign import summary
    from bot.records import CheckRow

    rows = [CheckRow(model="a", status="pass", stats={"codegen": {"generated_kernel_count": 3}}),
            CheckRow(model="b", status="fail_accuracy", failure_class="accuracy", baseline="new",
                     stats={"codegen": {"generated_kernel_count": 2, "parallel_reduction_count": 1}}),
            CheckRow(model="c", status="eager_1st_run_fail", failure_class="eager_error")]
    text = summary(rows, 90.0)
    assert "3 programs in 1.5 min (2.0 programs/min)" in text
    assert "fail_accuracy 1" in text and "pass 1" in text
    assert "invalid programs (failed eagerly, not compiler bugs, not filed): 1" in text
    assert "failing programs: 1 (1 new, 0 known" in text
    assert "generated_kernel_count 5 in 2" in text and "parallel_reduction_count 1 in 1" in text
    json.dumps(text)


def test_loading_a_program_registers_its_source_for_tracebacks(programs):
    import linecache

    ns = load(programs[0])
    filename = f"<{programs[0].name}>"
    assert "class Program" in "".join(linecache.getlines(filename)) and "Program" in ns


def test_the_actions_fuzz_inputs_become_the_check_stages_options(tmp_path):
    import io

    from bot import gha
    from bot.action.context import Context
    from bot.action.inputs import Inputs
    from bot.action.stages import check_options
    from bot.errors import UsageError
    from bot.options import to_argv

    def ctx(**inputs):
        return Context(env={}, inputs=Inputs(**inputs), event=gha.Event("schedule", {}),
                       cmds=gha.Commands(io.StringIO()), workdir=tmp_path, out=tmp_path / "out")

    argv = to_argv(check_options(ctx(suite="fuzz", seed="12", fuzz_time="3000", shard="2/4")))
    assert argv[2:] == ["--suite", "fuzz", "--seed", "12", "--fuzz-time", "3000", "--shard", "2/4"]
    with pytest.raises(UsageError, match="input 'fuzz-count' must be an integer"):
        check_options(ctx(suite="fuzz", fuzz_count="many"))


def test_the_scheduled_campaign_is_the_reusable_sweep_with_the_fuzz_source_over_several_shards():
    """.github/workflows/fuzz.yml calls sweep.yml (the check jobs hold no credential, the report job runs
    no model code: tests/test_action_security.py checks sweep.yml) with the fuzz source, a time budget
    and the seed, sharded; and sweep.yml hands those inputs to the check stage."""
    import json
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parent.parent / ".github/workflows"
    wf = yaml.safe_load((root / "fuzz.yml").read_text())
    assert wf["permissions"] == {} and "schedule" in wf[True]
    job = wf["jobs"]["fuzz"]
    assert job["uses"] == "$/./.github/workflows/sweep.yml"
    assert job["permissions"] == {"contents": "read", "issues": "write", "actions": "read"}
    assert job["with"]["suite"] == "fuzz" and job["with"]["fuzz-time"] and job["with"]["seed"]
    assert len(json.loads(job["with"]["shards"])) > 1
    sweep = yaml.safe_load((root / "sweep.yml").read_text())
    assert {"seed", "fuzz-count", "fuzz-time"} <= set(sweep[True]["workflow_call"]["inputs"])
    step = next(s for s in sweep["jobs"]["check"]["steps"] if s.get("uses") == "$/./")["with"]
    assert step["seed"] == "${{ inputs.seed }}" and step["fuzz-time"] == "${{ inputs.fuzz-time }}"
    assert step["shard"] == "${{ matrix.shard }}"


def test_a_program_that_fails_eagerly_is_discarded_not_filed():
    from bot.fuzz.campaign import summary
    from bot.records import CheckRow
    from bot.suites.fuzz import SOURCE

    eager = CheckRow(model="fuzz-s0-i000001", status="eager_1st_run_fail", failure_class="eager_error")
    reason = SOURCE.discard(eager)
    assert reason and reason.startswith("invalid program")
    for row in (CheckRow(status="fail_accuracy", failure_class="accuracy"), CheckRow(status="pass"),
                CheckRow(status="fail_to_run", failure_class="runtime_error")):
        assert SOURCE.discard(row) is None        # compiler failures are findings
    skipped = eager.replace(status="pass_due_to_skip", failure_class=None, skipped=reason)
    assert not skipped.failing                     # what the sweep records: nothing for minify or report
    assert "invalid programs (failed eagerly, not compiler bugs, not filed): 1" in summary([skipped], 60)


def test_programs_propose_training_and_dynamic_shapes_where_the_run_keeps_the_defaults():
    """About a third of the programs run as training steps and a fifth with dynamic shapes, by
    seed and index (a finding is checked again as it was found); a setting the run chose applies to
    every program."""
    from bot.check.settings import Settings
    from bot.check.sweep import varied
    from bot.suites.fuzz import fuzz_model

    proposed = [gen.settings_of(SEED, k) for k in range(400)]
    assert proposed == [gen.settings_of(SEED, k) for k in range(400)]
    training = sum(p.get("mode") == "training" for p in proposed) / 400
    dynamic = sum(bool(p.get("dynamic")) for p in proposed) / 400
    assert 0.25 < training < 0.45 and 0.12 < dynamic < 0.3, (training, dynamic)
    assert all(p["config"] == gen.CONFIG for p in proposed)
    k = next(k for k, p in enumerate(proposed) if p.get("mode") == "training" and p.get("dynamic"))
    m = fuzz_model(SEED, k)
    s = varied(m, Settings())
    assert (s.mode, s.dynamic) == ("training", True)
    assert s.config == gen.CONFIG and s.config["inductor.emulate_precision_casts"] is True
    s = varied(m, Settings(backend="aot_eager", dtype="float16", config={"dynamo.capture_scalar_outputs": False}))
    assert (s.backend, s.dtype, s.mode, s.dynamic) == ("aot_eager", "float16", "training", True)
    assert s.config["dynamo.capture_scalar_outputs"] is False   # the run's --config wins
    plain = next(k for k, p in enumerate(proposed) if set(p) == {"config"})
    s = varied(fuzz_model(SEED, plain), Settings())
    assert (s.mode, s.dynamic) == ("inference", False) and s.config == gen.CONFIG
    assert varied(fuzz_model(SEED, plain), Settings(mode="training")).mode == "training"


def test_the_campaigns_last_line_counts_new_and_known_bugs_and_findings_not_filed():
    from bot.fuzz.campaign import bugs
    from bot.records import ReportAction, ReportDoc

    why = "no verified repro (a generated program's failure is filed only with a repro that fails on its own)"
    doc = ReportDoc(run_id="r", tracker="local", actions=[
        ReportAction("created", issue=1, checks=["a", "b"]), ReportAction("created", issue=2, checks=["c"]),
        ReportAction("updated", issue=3, checks=["d"]),
        ReportAction("skipped", checks=["e", "f"], reason=f"{why}; not filed"),
        ReportAction("skipped", checks=["g"], reason="flaky: passed on rerun; not filed")])
    assert bugs(doc) == ("fuzz bugs: 2 new issues, 1 known (updated, unchanged or reopened); 2 failing programs "
                         "without a verified repro, not filed (their programs and logs are in the artifacts)")
    empty = ReportDoc(run_id="r", tracker="local")
    assert bugs(empty) == "fuzz bugs: 0 new issues, 0 known (updated, unchanged or reopened)"
    assert bugs(None) == "fuzz bugs: no report"


def test_an_integer_tensor_meeting_a_python_float_is_float64_in_the_fuzz_sources_reference_only():
    """torch.where(x > 0, x, 2.5) on an int32 x is torch's default float dtype: float32 in a run, and
    in the fuzz source's fp64 reference float64 (the other sources keep float32, as the harness does);
    the default dtype is restored after."""
    from bot.check.judge import fp64_reference
    from bot.check.settings import Settings
    from bot.records import Spec
    from bot.suites import source_of

    class Where(torch.nn.Module):
        def forward(self, x):
            return (torch.where(x > 0, x, 2.5),)

    x = torch.arange(-3, 3, dtype=torch.int32)
    fuzz = source_of(Spec(source="fuzz", model=gen.program_name(0, 0))).reference_default_dtype
    zoo = source_of(Spec(source="zoo", model="mlp_relu")).reference_default_dtype
    assert fp64_reference(Where(), (x,), Settings(), fuzz)[0].dtype == torch.float64
    assert fp64_reference(Where(), (x,), Settings(), zoo)[0].dtype == torch.float32
    assert torch.get_default_dtype() == torch.float32

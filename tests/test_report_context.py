"""bot/report/context.py: what a maintainer reads in a bug's issue. Each test writes a small run
directory through the product's writers, loads it as the report does, builds the issue's context and
renders the issue body and title with the stock templates; the assertions are on the rendered text
(the summary, culprit, configuration, versions, torch builds and the "Reproduce locally" commands)."""

from __future__ import annotations

import json
import re

import pytest

from bot import rundir
from bot.check.settings import Settings
from bot.options import ReportOptions
from bot.records import Culprit, PlainRepro
from bot.render import Renderer
from bot.report.context import issue_context
from bot.report.load import load_run
from bot.report.state import merge_state
from tests import rundirs

RELU = Culprit(ops=["aten.relu.default"], method="compiled-alone")
DIFF = [{"key": "inductor.cpp.simdlen", "default": None, "value": 8},
        {"key": "inductor.compile_threads", "default": 32, "value": 1}]
MINIMAL = DIFF[:1]


def issue(tmp_path, *pairs, opts: ReportOptions | None = None, edit=None):
    """(title, body) of the issue for the failures in ``pairs`` [(row, record or None)], as filed."""
    run = rundirs.write(tmp_path / "run", [r for r, _ in pairs], [f for _, f in pairs if f])
    if edit:   # an artifact someone changed after minify wrote it
        for row, _ in pairs:
            path = run / "failures" / row.id / "failure.json"
            path.write_text(json.dumps(edit(json.loads(path.read_text()))))
    group = load_run(run)[1]
    state, _ = merge_state(None, group, "run-1", "2026-11-01T00:00:00Z")
    ctx = issue_context(group, state, opts or ReportOptions(), run)
    r = Renderer()
    return r.title(ctx), r.body(ctx, state.to_json())[0]


def section(body: str, name: str) -> str:
    m = re.search(rf"^### {re.escape(name)}\n(.*?)(?=^### |\Z)", body, re.S | re.M)
    assert m, f"no section {name!r} in the body:\n{body}"
    return m.group(1)


def reproduce(body: str) -> list[str]:
    """The lines of the "Reproduce locally" block, as a reader copies them."""
    block = section(body, "Reproduce locally")
    m = re.search(r"^(`{3,})sh\n(.*?)\n\1$", block, re.S | re.M)
    assert m, block
    return m.group(2).splitlines()


def relu_failure(model="mlp_relu", settings=None, **kw):
    row = rundirs.check(model, settings=settings)
    return row, rundirs.failure(row, culprit=RELU, diff=DIFF, minimal=MINIMAL, **kw)


# --------------------------------------------------------------------------- what the bug is

def test_the_title_and_summary_name_the_stage_the_op_and_the_numbers(tmp_path):
    title, body = issue(tmp_path, relu_failure())
    assert title == "[minify-bot] inductor: accuracy failure in aten.relu.default (float32, cpu)"
    assert body.startswith("**wrong results: RMSE 0.25 vs fp64, eager 1e-08, tolerance 0.0001 · "
                           "inductor stage (inductor, inference, float32, cpu) on mlp\\_relu**")


def test_the_headline_is_the_wrong_value_and_the_readout_says_a_dtype_change(tmp_path):
    from bot.records import Readout, ReadoutNode

    row = rundirs.check()
    readout = Readout(nodes=[ReadoutNode(op="aten.eq.Scalar", shape=[8], dtype="uint8", compiled_dtype="bool",
                                         max_abs_compiled=0.0, rmse_compiled=0.0, max_abs_eager=0.0,
                                         rmse_eager=0.0, diverges=True),
                             ReadoutNode(op="aten.relu.default", shape=[8], dtype="float32",
                                         max_abs_compiled=1.23456789, rmse_compiled=0.5, max_abs_eager=1.5e-8,
                                         rmse_eager=1e-9, diverges=True)],
                      first_diverging="aten.relu.default", deterministic=True)
    _, body = issue(tmp_path, (row, rundirs.failure(row, readout=readout)))
    assert body.startswith("**output of aten.relu.default wrong: max error 1.23 (eager 1.5e-08) · inductor stage")
    assert "| `aten.eq.Scalar` | 0 / 0 | 0 / 0 | ✓ (dtype uint8 → bool) |" in body


def test_a_program_that_exited_non_zero_shows_its_output_as_output_and_its_error_as_the_headline(tmp_path):
    output = ("UserWarning: TF32 is off\nrunning 3 steps\n"
              "RuntimeError: compiled and eager differ by 0.53\nsummary: 1 failure\n")
    row = rundirs.check("prog", status="fail_to_run", failure_class="runtime_error",
                        spec={"source": "command", "command": "python prog.py", "model": "prog"},
                        error={"type": "ExitCode", "message": "command exited with code 1", "traceback": output})
    title, body = issue(tmp_path, (row, rundirs.failure(row, status="not_reproduced")))
    assert body.startswith("**RuntimeError: compiled and eager differ by 0.53 · ")
    assert "ExitCode" not in title and "ExitCode" not in body.split("\n", 1)[0]
    assert "<summary>Program output</summary>" in body and "<summary>Traceback</summary>" not in body
    assert "running 3 steps" in section(body, "Failure")


def test_no_runner_path_reaches_the_body_and_the_bots_own_frames_leave_the_traceback(tmp_path, monkeypatch):
    import os
    import sys

    home, work = os.path.expanduser("~"), str(tmp_path / "ws")
    monkeypatch.setenv("GITHUB_WORKSPACE", work)
    monkeypatch.setenv("RUNNER_TEMP", "/opt/runner/_temp")
    site = f"{sys.prefix}/lib/python3.11/site-packages"
    tb = ("Traceback (most recent call last):\n"
          f'  File "{work}/bench/prog.py", line 9, in <module>\n    main()\n'
          f'  File "/opt/minify/bot/torch_adapter/hook.py", line 120, in wrapper\n    return fn(*a, **k)\n'
          f'  File "{site}/torch/_dynamo/eval_frame.py", line 5, in _fn\n    return fn(*args)\n'
          f'  File "/tmp/torchinductor_ci/ab/cabcdef.py", line 30, in call\n    kernel(buf0)\n'
          f'  File "{home}/.cache/x.py", line 1, in f\n'
          f"RuntimeError: bad thing in /opt/runner/_temp/abc/out.bin and {work}/data\n")
    row = rundirs.check("prog", status="fail_to_run", failure_class="runtime_error",
                        spec={"source": "command", "command": "python prog.py", "model": "prog",
                              "cwd": f"{work}/bench"},
                        error={"type": "RuntimeError", "message": f"bad thing in {work}/data", "traceback": tb})
    title, body = issue(tmp_path, (row, rundirs.failure(row, status="not_reproduced")),
                        opts=ReportOptions(trusted_commands=["python prog.py"]))
    visible = title + body
    for path in (work, home, sys.prefix, "/opt/runner/_temp", "/tmp/", "site-packages/torch", str(tmp_path)):
        assert path not in visible, path
    assert 'File "bench/prog.py", line 9' in body
    assert 'File "<site-packages>/torch/_dynamo/eval_frame.py"' in body
    assert 'File "<inductor-cache>/ab/cabcdef.py"' in body
    assert "hook.py" not in body and "in wrapper" not in body
    assert "cd bench" in reproduce(body)


def test_the_culprit_is_the_op_that_fails_compiled_alone(tmp_path):
    _, body = issue(tmp_path, relu_failure())
    assert section(body, "Culprit").strip() == "`aten.relu.default`: fails when compiled alone."


def test_without_a_culprit_there_is_no_culprit_section(tmp_path):
    row = rundirs.check()
    _, body = issue(tmp_path, (row, rundirs.failure(row)))
    assert "### Culprit" not in body


def test_an_op_name_that_is_not_an_op_name_is_never_shown(tmp_path):
    def hostile(doc):
        doc["culprit"]["ops"] = ["<img src=x onerror=alert(1)>", "aten.relu.default"]
        return doc
    title, body = issue(tmp_path, relu_failure(), edit=hostile)
    assert "onerror" not in body and "onerror" not in title
    assert section(body, "Culprit").strip().startswith("`aten.relu.default`")


def test_the_title_names_the_dtype_the_culprits_ops_read_when_they_read_one(tmp_path):
    """A uint8 bug found in a float32 program is titled by uint8 (what a maintainer searches for);
    a culprit that reads several dtypes (an embedding's int64 ids and float32 weights), or a repro
    that is not verified, keeps the check's dtype."""
    from bot.records import GraphOp

    for graph, verified, dtype in (([GraphOp("aten.any.dim", ["uint8"], [2])], True, "uint8"),
                                   ([GraphOp("aten.embedding.default", ["float32", "int64"], [2, 1])], True, "float32"),
                                   ([GraphOp("aten.any.dim", ["uint8"], [2])], False, "float32")):
        row = rundirs.check(f"prog_{dtype}_{verified}")
        rec = rundirs.failure(row, ops=(graph[0].op,), status="minimized" if verified else "not_reproduced")
        if verified:
            rec = rec.replace(repro=rec.repro.replace(graph=graph))
        title, _ = issue(tmp_path / f"{dtype}{verified}", (row, rec))
        assert title.endswith(f" ({dtype}, cpu)"), title


def test_an_error_shows_its_type_first_line_and_full_message(tmp_path):
    err = {"type": "CppCompileError", "message": "C++ compile error\nerror: 'x' was not declared",
           "traceback": "Traceback (most recent call last):\n  File \"a.py\", line 1\nCppCompileError: boom"}
    row = rundirs.check("conv", status="fail_to_run", failure_class="compile_error", error=err)
    title, body = issue(tmp_path, (row, rundirs.failure(row, ops=("aten.convolution.default",))))
    assert "compile error" in title and "(float32, cpu)" in title
    failure = section(body, "Failure")
    # the compiler's own first error line, not only the wrapper's "C++ compile error": in the failure
    # line and the body's headline (without the file and position g++ writes before it)
    assert "`CppCompileError`: C\\+\\+ compile error: `'x' was not declared`" in failure, failure
    assert "Full error message" in failure and "error: 'x' was not declared" in failure
    assert "CppCompileError: boom" in failure
    assert body.startswith("**CppCompileError: 'x' was not declared ·"), body[:200]


def test_a_compile_errors_failure_leaves_out_the_compilers_command_and_cuts_generated_code_lines(tmp_path):
    """A fuzz finding's issue showed g++'s whole command line twice (the traceback's copy of the
    message and the full message) and a 1,000-character line of generated code (a fused kernel's
    call, every argument type) with a caret line as long under it."""
    command = "g++ <inductor-cache>/pa/cpa5.main.cpp -D TORCH_INDUCTOR_CPP_WRAPPER " + "-I<site-packages>/x " * 40
    message = ("C++ compile error\nCommand:\n" + command + "\nOutput:\n<inductor-cache>/pa/cpa5.main.cpp:239:57: "
               "error: no matching function for call to 'sum_masked_reduce(VecMask<float, 1>&, VecMask<unsigned "
               "char, 1>&, int64_t)'\n<site-packages>/cpp_prefix.h:378:10: note: candidate: 'template<class T> T "
               "sum_masked_reduce(const T&, const T&, int64_t)'\n")
    call = "    cpp_fused_sum_0 = async_compile.cpp_pybinding([" + "'const float*', " * 80 + "], r\'\'\'"
    traceback = ("Traceback (most recent call last):\n  File \"<inductor-cache>/4r/c4r4.py\", line 34, in <module>\n"
                 + call + "\n" + " " * 60 + "^" * 900 + "\n"
                 "torch._inductor.exc.InductorError: CppCompileError: " + message)
    err = {"type": "CppCompileError", "message": message, "traceback": traceback}
    row = rundirs.check("fz", status="fail_to_run", failure_class="compile_error", error=err)
    _, body = issue(tmp_path, (row, rundirs.failure(row, ops=("aten.sum.dim_IntList",))))
    failure = section(body, "Failure")
    assert "-I<site-packages>/x" not in failure and "D TORCH_INDUCTOR_CPP_WRAPPER" not in failure
    # the message once, under "Full error message": the traceback ends at its first line
    assert failure.count("(the compiler's command line is in failure.json in the artifacts)") == 1
    assert failure.count("note: candidate") == 1 and failure.count("error: no matching function") == 1
    assert "InductorError: CppCompileError: C++ compile error\n[the message goes on: see the full error message]" \
        in failure
    assert max(len(line) for line in failure.splitlines()) < 400
    assert "cpp_fused_sum_0 = async_compile.cpp_pybinding(['const float*'," in failure and "^^^^" not in failure
    # the compiler's first error line is still the failure's headline
    assert "`CppCompileError`: C\\+\\+ compile error: `no matching function for call to 'sum_masked_reduce(" in failure


def test_the_first_compiler_error_is_quoted_as_the_compiler_wrote_it():
    from bot.signature import first_compiler_error

    out = ("C++ compile error\n\nCommand:\ng++ k.cpp -o k.so\n\nOutput:\n"
           "k.cpp: In function \u2018void kernel(const int16_t*)\u2019:\n"
           "k.cpp:48:51: error: no matching function for call to \u2018max_propagate_nan(int&, short int&)\u2019\n"
           "k.cpp:50:1: error: expected \u2018;\u2019 before \u2018}\u2019 token\n")
    assert first_compiler_error(out) == "no matching function for call to 'max_propagate_nan(int&, short int&)'"
    assert first_compiler_error("x.cpp:1:10: fatal error: Python.h: No such file or directory") == \
        "fatal error: Python.h: No such file or directory"
    assert first_compiler_error("C++ compile error") is None and first_compiler_error(None) is None


# --------------------------------------------------------------------------- configuration and versions

def test_the_configuration_shows_the_minimal_diff_and_every_non_default_setting(tmp_path):
    _, body = issue(tmp_path, relu_failure())
    config = section(body, "Configuration")
    minimal, _, everything = config.partition("All non-default settings (2)")
    assert "| `inductor.cpp.simdlen` | `None` | `8` |" in minimal
    assert "compile_threads" not in minimal
    assert "| `inductor.compile_threads` | `32` | `1` |" in everything


def test_no_settings_needed_is_said_in_words(tmp_path):
    row = rundirs.check()
    _, body = issue(tmp_path, (row, rundirs.failure(row)))
    config = section(body, "Configuration")
    assert "No non-default settings are needed to fail." in config and "All non-default" not in config


def test_the_versions_table_lists_what_was_recorded_and_leaves_out_what_was_not(tmp_path):
    _, body = issue(tmp_path, relu_failure())
    versions = section(body, "Versions")
    for key, value in (("torch", "2.13.0+cpu"), ("torch\\_git", "0123abc"), ("python", "3.11.7"), ("os", "Linux")):
        assert f"| {key} | `{value}` |" in versions
    assert "cuda" not in versions                     # None: not a row


def test_a_harness_check_adds_its_revision_and_libraries_and_drops_unsafe_values(tmp_path):
    harness = {"revision": "0123456789abcdef0123456789abcdef01234567", "transformers": "4.46.0",
               "timm": "$(curl evil)", "cpu_isa": "avx512"}
    row = rundirs.check("BertForMaskedLM", spec={"source": "harness", "suite": "huggingface",
                                                 "model": "BertForMaskedLM"}, harness=harness)
    _, body = issue(tmp_path, (row, rundirs.failure(row)))
    versions = section(body, "Versions")
    assert "| harness revision | `0123456789abcdef0123456789abcdef01234567` |" in versions
    assert "| transformers | `4.46.0` |" in versions and "| cpu vector ISA | `avx512` |" in versions
    assert "curl" not in body


def test_torch_builds_say_where_the_bug_is_and_link_the_commit_range(tmp_path):
    builds = {"present_in": ["nightly-20261101"], "absent_in": ["2.12.0"],
              "boundaries": [{"kind": "introduced", "before": "2.12.0", "after": "nightly-20261101",
                              "commits": {"from": "aaaaaaa", "to": "bbbbbbb"}},
                             {"kind": "fixed", "before": "x", "after": "y",
                              "commits": {"from": "not-a-hash", "to": "bbbbbbb"}}]}
    _, body = issue(tmp_path, relu_failure(builds=builds))
    text = section(body, "Torch builds")
    assert text.startswith("Present in: torch 2.13.0\\+cpu, nightly-20261101 · not present in: 2.12.0.")
    assert ("- introduced between 2.12.0 and nightly-20261101: commits `aaaaaaa..bbbbbbb` "
            "([compare](https://github.com/pytorch/pytorch/compare/aaaaaaa...bbbbbbb))") in text
    assert "- fixed between x and y\n" in text + "\n" and "not-a-hash" not in body


# --------------------------------------------------------------------------- the repro and how to run it

def test_the_best_repro_of_the_group_is_the_one_shown(tmp_path):
    a, b = rundirs.check("aaa_first"), rundirs.check("zzz_second")
    worse = rundirs.failure(a, culprit=RELU, status="not_reproduced")
    better = rundirs.failure(b, culprit=RELU)
    _, body = issue(tmp_path, (a, worse), (b, better))
    repro = section(body, "Minimized repro")
    assert repro.startswith("Minimized and verified: 40 → 1 graph nodes in 9 queries.")
    assert "class Repro(torch.nn.Module)" in repro
    assert "--models zzz_second" in "\n".join(reproduce(body))


def test_reproduce_locally_runs_the_repro_then_the_same_check(tmp_path):
    s = Settings(config={"inductor.cpp.simdlen": 8}, dynamic=True)
    _, body = issue(tmp_path, relu_failure(settings=s))
    assert reproduce(body) == [
        "python repro.py    # from the failure's directory in the artifacts",
        "minify-bot check --models mlp_relu --backend inductor --mode inference --dtype float32 --device cpu "
        "--config inductor.cpp.simdlen=8 --dynamic"]


def test_without_a_repro_reproduce_locally_is_the_check_alone(tmp_path):
    row = rundirs.check()
    _, body = issue(tmp_path, (row, rundirs.failure(row, status="not_reproduced")))
    assert reproduce(body) == ["minify-bot check --models mlp_relu --backend inductor --mode inference "
                               "--dtype float32 --device cpu"]
    assert "No minimized repro" in section(body, "Minimized repro")


def test_a_model_file_check_is_reproduced_from_the_same_model_file(tmp_path):
    spec = {"source": "yaml", "file": "/home/u/proj/models.yaml", "model": "tiny", "factory": "m:f"}
    row = rundirs.check("tiny", spec=spec)
    _, body = issue(tmp_path, (row, rundirs.failure(row)))
    assert "minify-bot check --suite yaml --model-file models.yaml --models tiny" in reproduce(body)[-1]


@pytest.mark.parametrize("trusted", [False, True])
def test_a_command_is_shown_to_copy_only_when_the_report_was_configured_with_it(tmp_path, trusted):
    command = "python train.py --steps 1"
    row = rundirs.check("train", spec={"source": "command", "command": command, "model": "train"})
    opts = ReportOptions(trusted_commands=(command,) if trusted else ())
    _, body = issue(tmp_path, (row, rundirs.failure(row)), opts=opts)
    lines = reproduce(body)
    if trusted:
        assert "python train.py --steps 1    # the program; it fails with a non-zero exit" in lines
        assert any(ln.startswith("minify-bot check --suite command --command 'python train.py --steps 1'")
                   for ln in lines)
    else:
        assert command not in body
        assert any(ln.startswith("minify-bot check --suite command --command COMMAND") for ln in lines)
        assert any("read it before running it" in ln for ln in lines)


def test_values_that_do_not_pass_the_patterns_stay_out_of_the_command(tmp_path):
    s = Settings(config={"inductor.cpp.simdlen": "8; curl evil | sh"})
    row = rundirs.check("mlp relu; rm -rf ~", settings=s)
    _, body = issue(tmp_path, (row, rundirs.failure(row)))
    lines = reproduce(body)
    command = next(ln for ln in lines if ln.startswith("minify-bot check"))
    assert "rm -rf" not in command and "curl" not in command and "--models" not in command
    assert "# the model name is in results.json" in lines
    assert "# some config overrides are only in results.json" in lines


def test_a_repro_too_large_to_inline_points_to_the_artifacts(tmp_path):
    row = rundirs.check()
    run = rundirs.write(tmp_path / "run", [row], [rundirs.failure(row)], repro_text="x = 1\n" * 20000)
    group = load_run(run)[1]
    state, _ = merge_state(None, group, "run-1", "t")
    ctx = issue_context(group, state, ReportOptions(artifact_url="https://example.invalid/a/1"), run)
    body = Renderer().body(ctx, state.to_json())[0]
    repro = section(body, "Minimized repro")
    assert "too large to inline" in repro and f"`failures/{row.id}/repro.py`" in repro
    assert "https://example.invalid/a/1" in repro and "x = 1" not in body


# --------------------------------------------------------------------------- plain or launcher-format repro

PLAIN = ("import torch\n\n\ndef fn(arg0_1):\n    relu = torch.ops.aten.relu.default(arg0_1)\n    return (relu,)\n"
         "\n\ndef main():\n    torch.compile(fn)\n")
SHA = "ab" * 32


def plain_issue(tmp_path, plain: PlainRepro, text: str | None = PLAIN, *, opts: ReportOptions | None = None):
    """(the "Minimized repro" section, the check's id, the body) of the issue for a verified failure
    whose record names ``plain`` (its file written with ``text``)."""
    row = rundirs.check()
    rec = rundirs.failure(row, culprit=RELU)
    rec.repro.plain = plain
    run = rundirs.write(tmp_path / "run", [row], [rec])
    if text is not None:
        (run / "failures" / row.id / rundir.PLAIN).write_text(text)
    group = load_run(run)[1]
    state, _ = merge_state(None, group, "run-1", "t")
    ctx = issue_context(group, state, opts or ReportOptions(), run)
    body = Renderer().body(ctx, state.to_json())[0]
    return section(body, "Minimized repro"), row.id, body


def verified_plain(**kw) -> PlainRepro:
    return PlainRepro(**{"path": rundir.PLAIN, "inputs_inline": True, "inputs_sha256": SHA, "runs": 3,
                         "failed_same_way": 3, **kw})


def test_a_plain_repro_that_reproduced_is_the_one_inlined_and_the_launcher_is_named(tmp_path):
    repro, rid, body = plain_issue(tmp_path, verified_plain())
    assert "def fn(arg0_1):" in repro and "class Repro(" not in repro
    assert "Save as `repro_plain.py` and run `python repro_plain.py`: its inputs are inline, it needs no other " \
           "file." in repro
    assert "This is the plain repro" in repro and "public torch APIs only" in repro
    assert "failed the same way in 3 of 3 fresh runs" in repro
    assert f"torch's launcher-format repro (`run_repro`) is `failures/{rid}/repro.py` in the artifacts" in repro
    assert "next to the `inputs/` directory" not in repro
    assert reproduce(body)[0] == "python repro_plain.py    # from the failure's directory in the artifacts"


def test_a_plain_repro_whose_inputs_are_in_the_artifacts_names_them_with_their_hash(tmp_path):
    plain = verified_plain(inputs_inline=False, inputs_file=f"{rundir.INPUTS_DIR}/{rundir.PLAIN_INPUTS}")
    repro, _, _ = plain_issue(tmp_path, plain)
    assert "def fn(arg0_1):" in repro
    assert (f"run `python repro_plain.py` next to the `inputs/` directory from the artifacts "
            f"(`inputs/plain_inputs.pt`, the sha256 of its storages `{SHA}`: the repro checks it).") in repro


def test_a_plain_repro_that_did_not_reproduce_leaves_the_launcher_inlined_and_says_so(tmp_path):
    repro, rid, body = plain_issue(tmp_path, verified_plain(failed_same_way=0))
    assert "class Repro(torch.nn.Module)" in repro and "def fn(arg0_1)" not in repro
    assert "Save as `repro.py` and run `python repro.py`." in repro
    assert "This is torch's launcher-format repro (`run_repro`, private torch APIs)." in repro
    assert reproduce(body)[0] == "python repro.py    # from the failure's directory in the artifacts"
    assert (f"The plain repro (public torch APIs only), `failures/{rid}/repro_plain.py` in the artifacts, did not "
            "fail the same way in its fresh runs (0 of 3).") in repro


def test_a_plain_repro_not_written_says_why_escaped(tmp_path):
    plain = PlainRepro(reason="the graph's code reads `_evil` @someone <b>x</b>")
    repro, _, _ = plain_issue(tmp_path, plain, text=None)
    assert "class Repro(torch.nn.Module)" in repro
    line = next(ln for ln in repro.splitlines() if "No plain repro" in ln)
    assert "@someone" not in line and "<b>" not in line and "\\`\\_evil\\`" in line


def test_a_plain_repro_too_large_to_inline_leaves_the_launcher_inlined(tmp_path):
    repro, rid, _ = plain_issue(tmp_path, verified_plain(), text="x = 1\n" * 10000)
    assert "class Repro(torch.nn.Module)" in repro and "x = 1" not in repro
    assert f"The plain repro (public torch APIs only) is too large to inline: it is `failures/{rid}/repro_plain.py`" \
           in repro


def test_a_plain_repro_outside_the_failures_directory_is_never_read(tmp_path):
    (tmp_path / "secret.py").write_text("TOKEN = 'x'\n")
    for path in ("../../../secret.py", "/etc/passwd"):
        repro, _, _ = plain_issue(tmp_path / path.strip("/").replace("/", "_"), verified_plain(path=path), text=None)
        assert "TOKEN" not in repro and "class Repro(torch.nn.Module)" in repro


def test_a_record_without_a_plain_repro_inlines_the_launcher_as_before(tmp_path):
    _, body = issue(tmp_path, relu_failure())
    repro = section(body, "Minimized repro")
    assert "Save as `repro.py` and run `python repro.py`." in repro
    assert "This is torch's launcher-format repro" in repro and "plain repro" not in repro


def test_a_compile_errors_sections_leave_out_the_compilers_warnings_and_keep_its_error(tmp_path):
    """g++'s output for a fuzz finding ended in a screen of ``-Woverflow`` warnings from torch's own
    headers: the Traceback section showed only those. The warnings go (a line says how many), the
    error and its notes stay."""
    from bot.signature import without_compiler_warnings as sg_without_warnings

    warning = ("<site-packages>/torch/include/ATen/cpu/vec/vec256/vec256_qint.h:243:7: warning: overflow in "
               "conversion from 'int' to 'char' changes value from '255' [-Woverflow]\n"
               "  243 |       0xff, 0xff, 0xff, 0xff,\n      |       ^~~~\n")
    output = ("C++ compile error\n\nOutput:\nk.cpp:78:50: error: no matching function for call to "
              "'argmax_combine(IndexValue<short int>&, int&, int64_t&)'\n"
              "   78 |     tmp_acc0 = argmax_combine(tmp_acc0, tmp57, x0);\n"
              "cpp_prefix.h:454:23: note: candidate: 'template<class T> IndexValue<T>& argmax_combine'\n"
              + warning * 12)
    # the check keeps the tail of a long traceback: it can start inside a warning
    err = {"type": "CppCompileError", "message": output, "traceback": "      |       ^~~~\n" + warning * 3}
    row = rundirs.check("fz", status="fail_to_run", failure_class="compile_error", error=err)
    _, body = issue(tmp_path, (row, rundirs.failure(row, ops=("aten.argmax.default",))))
    failure = section(body, "Failure")
    assert "warning:" not in failure and "0xff" not in failure, failure
    assert "(12 compiler warnings left out)" in failure and "(3 compiler warnings left out)" in failure
    assert failure.count("note: candidate") == 1 and "argmax_combine(tmp_acc0, tmp57, x0)" in failure
    # the words alone are no compiler's warning
    assert sg_without_warnings("RuntimeError: warning: x\n") == "RuntimeError: warning: x\n"

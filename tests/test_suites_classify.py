"""bot/suites/classify.py: how a finished program run is judged (a user's command, PyTorch's
harness). The programs are real: small Python processes that exit, raise, print or die by a signal
the way a model program does, and their exit status and output are judged as the command source
judges them. No torch, nothing compiled."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from bot.errors import UsageError
from bot.records import CheckRow
from bot.suites.classify import Patterns, classify, last_exception


def run(code: str, **kw) -> CheckRow:
    """Run ``code`` as a program file (stderr into its output, as the command source captures it)
    and judge it."""
    with tempfile.TemporaryDirectory() as d:
        program = Path(d) / "program.py"
        program.write_text(textwrap.dedent(code))
        p = subprocess.run([sys.executable, str(program)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=60)
    return classify(returncode=p.returncode, output=p.stdout, **kw)


def test_a_program_that_exits_0_passes():
    row = run("print('step 1 loss 0.3')")
    assert (row.status, row.failure_class, row.error) == ("pass", None, None)
    assert row.classified_by == "exit status" and row.exit_code is None


def test_a_program_killed_by_sigkill_is_out_of_memory():
    row = run("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    assert (row.status, row.failure_class) == ("OOM", "oom")
    assert row.error.message == "command killed by SIGKILL (out of memory?)"


def test_a_segfault_is_a_crash_named_by_its_signal():
    row = run("import os, signal; print('running', flush=True); os.kill(os.getpid(), signal.SIGSEGV)",
              what="train.py")
    assert (row.status, row.failure_class, row.error.type) == ("fail_to_run", "crash", "SIGSEGV")
    assert row.error.message == "train.py died with SIGSEGV" and "running" in row.error.traceback


ABORT = """
import os, sys
sys.stderr.write("terminate called after throwing an instance of 'c10::Error'\\n  what():  bad index\\n")
sys.stderr.flush()
os.abort()
"""


def test_an_abort_after_a_cpp_exception_in_compiled_code_is_a_runtime_error():
    row = run(ABORT, compiled_graphs=1)
    assert (row.failure_class, row.error.type, row.error.signal) == \
        ("runtime_error", "UncaughtCppException", "SIGABRT")
    assert "c10::Error" in row.error.message


def test_an_abort_before_anything_compiled_is_a_crash():
    row = run(ABORT, compiled_graphs=0)
    assert (row.failure_class, row.error.type) == ("crash", "SIGABRT")


def test_a_program_over_its_time_limit_is_a_timeout_whatever_it_printed():
    with pytest.raises(subprocess.TimeoutExpired) as info:
        subprocess.run([sys.executable, "-c", "import time; print('Tensor-likes are not close', flush=True); "
                        "time.sleep(30)"], capture_output=True, text=True, timeout=1)
    out = info.value.stdout
    out = out.decode() if isinstance(out, bytes) else out or ""
    assert "not close" in out                      # what it printed would read as an accuracy failure
    row = classify(returncode=None, output=out, timed_out=True, timeout=1)
    assert (row.status, row.failure_class) == ("timeout", "timeout")
    assert row.error.message == "command did not finish within 1 s"


@pytest.mark.parametrize("code", [
    "raise AssertionError('Tensor-likes are not close!\\n\\nMismatched elements: 3 / 8')",
    "import sys; print('accuracy mismatch: max diff 0.5'); sys.exit(1)",
    "def allclose(a, b):\n    return False\nassert allclose(1.0, 2.0)",
    "raise RuntimeError('compiled output differs from eager')",
])
def test_mismatch_wording_or_a_failed_allclose_is_an_accuracy_failure(code):
    row = run(code)
    assert (row.status, row.failure_class) == ("fail_accuracy", "accuracy")
    assert row.exit_code == 1 and row.classified_by.startswith("output: ")


@pytest.mark.parametrize("wording", ["size mismatch for fc.weight", "shape mismatch: 3 vs 4", "dtype mismatch"])
def test_a_shape_or_dtype_mismatch_is_not_an_accuracy_failure(wording):
    row = run(f"raise RuntimeError({wording!r})")
    assert (row.failure_class, row.error.type, row.error.message) == \
        ("runtime_error", "RuntimeError", wording)


def test_a_compiler_exception_is_a_compile_error_with_its_diagnostics_and_traceback():
    code = """
    import sys
    class BackendCompilerFailed(Exception):
        pass
    def compile_graph():
        raise BackendCompilerFailed("backend='inductor' raised: CppCompileError")
    try:
        compile_graph()
    except BackendCompilerFailed:
        import traceback; traceback.print_exc()
        print("/tmp/x.cpp:3:5: error: 'vec' was not declared in this scope", file=sys.stderr)
        print("g++ -O3 -march=native /tmp/x.cpp  (the compiler's command line)", file=sys.stderr)
        sys.exit(1)
    """
    row = run(code)
    assert (row.status, row.failure_class, row.error.type) == \
        ("fail_to_run", "compile_error", "BackendCompilerFailed")
    assert row.error.message.splitlines() == ["backend='inductor' raised: CppCompileError",
                                                    "/tmp/x.cpp:3:5: error: 'vec' was not declared in this scope"]
    tb = row.error.traceback
    assert tb.startswith("Traceback (most recent call last):") and "compile_graph" in tb and "g++" not in tb


def test_a_missing_package_before_anything_compiled_is_a_setup_failure():
    code = "import no_such_model_library_xyz"
    row = run(code, compiled_graphs=0)
    assert (row.status, row.failure_class, row.error.type) == \
        ("model_fail_to_load", "setup_error", "ModuleNotFoundError")
    # the same words after a graph compiled are the program's own failure
    assert run(code, compiled_graphs=2).failure_class == "runtime_error"


def test_any_other_failing_exit_is_a_runtime_error_with_its_code():
    row = run("import sys; print('bye'); sys.exit(3)")
    assert (row.status, row.failure_class, row.exit_code) == ("fail_to_run", "runtime_error", 3)
    assert (row.error.type, row.error.message) == ("ExitCode", "command exited with code 3")


def test_the_users_patterns_come_before_ours():
    code = "import sys; print('Tensor-likes are not close'); print('NaN in loss at step 4'); sys.exit(1)"
    row = run(code, patterns=Patterns(error=[r"NaN in loss"]))
    assert row.failure_class == "runtime_error" and row.classified_by == "--error-pattern matched 'NaN in loss'"
    row = run("import sys; print('MAXDIFF 0.7 over budget'); sys.exit(2)",
              patterns=Patterns(accuracy=[r"MAXDIFF \S+ over"]))
    assert (row.status, row.failure_class) == ("fail_accuracy", "accuracy")
    assert row.classified_by == "--accuracy-pattern matched 'MAXDIFF 0.7 over'"


def test_an_error_pattern_with_a_compiler_exception_in_the_output_is_a_compile_error():
    row = run("import sys; print('InductorError: LoweringException'); print('FATAL step'); sys.exit(1)",
              patterns=Patterns(error=["FATAL"]))
    assert row.failure_class == "compile_error"


def test_a_pattern_matching_output_of_a_passing_program_does_not_fail_it():
    row = run("print('NaN in loss (recovered)')", patterns=Patterns(error=["NaN in loss"]))
    assert row.status == "pass"


def test_an_invalid_pattern_is_a_usage_error_naming_the_option():
    with pytest.raises(UsageError, match=r"--accuracy-pattern '\(unclosed' is not a valid regular expression"):
        Patterns(accuracy=["(unclosed"]).validate()


@pytest.mark.parametrize("word, returncode, status, cls", [
    ("pass", 0, "pass", None),
    ("pass_due_to_skip", 0, "pass_due_to_skip", None),
    ("fail_accuracy", 0, "fail_accuracy", "accuracy"),
    ("eager_two_runs_differ", 0, "eager_two_runs_differ", "eager_error"),
    ("fail_to_run", 1, "fail_to_run", "runtime_error"),
])
def test_the_harness_csv_status_word_decides_when_nothing_more_precise_is_known(word, returncode, status, cls):
    row = classify(returncode=returncode, output="loading model\n", status_word=word, what="harness")
    assert (row.status, row.failure_class) == (status, cls)


def test_the_last_exception_line_is_the_error_and_its_type_is_the_short_name():
    out = "Traceback...\nValueError: first\nduring handling\ntorch._dynamo.exc.BackendCompilerFailed: backend raised\n"
    assert last_exception(out) == ("BackendCompilerFailed", "backend raised")
    assert last_exception("no exception here\n") is None


def test_the_exception_that_ends_a_traceback_is_named_whatever_its_name():
    """dynamo's ``Unsupported`` (a graph break under ``fullgraph=True``) has no Error in its name: the
    line that ends the traceback still names the failure, not the exit status; a line a program
    prints in its own words is no exception."""
    out = ("Traceback (most recent call last):\n"
           '  File "prog.py", line 7, in <module>\n'
           "    out = torch.compile(f, fullgraph=True)(x)\n"
           "torch._dynamo.exc.Unsupported: Failed to trace builtin operator\n"
           "  Explanation: Dynamo does not know how to trace builtin operator `print`\n"
           "\nfrom user code:\n   File \"prog.py\", line 4, in f\n")
    row = classify(returncode=1, output=out)
    assert (row.failure_class, row.error.type, row.error.message) == ("compile_error", "Unsupported",
                                                                      "Failed to trace builtin operator")
    assert row.error.traceback.endswith("torch._dynamo.exc.Unsupported: Failed to trace builtin operator")
    mine = classify(returncode=1, output="step 3: loss went up\nResult: worse than eager\n")
    assert mine.error.type == "ExitCode"
    # a log line written between the frames and the exception is not the exception
    logged = out.replace("torch._dynamo.exc", "WARNING:root:a log line\ntorch._dynamo.exc", 1)
    row = classify(returncode=1, output=logged)
    assert row.error.type == "Unsupported" and row.error.traceback.endswith("Failed to trace builtin operator")


def test_a_failing_pytest_test_is_named_by_its_exception_not_the_exit_status(tmp_path):
    """A test suite as the benchmark (``python -m pytest``): pytest writes the exception of a
    failing test after an ``E`` marker and no Python traceback; it is still the error."""
    (tmp_path / "test_model.py").write_text(textwrap.dedent("""
        def test_compiled_matches_eager():
            a, b = [1.0, 2.0], [1.0, 2.5]
            assert a == b, "Tensor-likes are not close!"

        def test_import():
            pass
    """))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_model.py"],
                       cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert p.returncode == 1, p.stdout
    row = classify(returncode=p.returncode, output=p.stdout)
    assert (row.failure_class, row.error.type) == ("accuracy", "AssertionError")
    assert row.error.message.startswith("Tensor-likes are not close!")


def test_an_exception_a_program_wraps_around_the_failure_is_seen_through():
    """``raise BenchmarkError(...) from exc``: the failure is the exception it wraps (what a captured
    graph raises), with its compiler diagnostics; one raised while handling another is not a
    wrapper, and neither is torch's own exception."""
    row = run("""
        class BenchmarkError(Exception):
            pass

        def compile_model():
            raise RuntimeError("CppCompileError: C++ compile error\\n"
                               "/tmp/k.cpp:3:5: error: conflicting declaration 'x'")

        try:
            compile_model()
        except Exception as exc:
            raise BenchmarkError("pooler: torch.compile failed") from exc
    """)
    assert (row.error.type, row.error.message.splitlines()[0]) == ("RuntimeError", "CppCompileError: C++ compile error")
    assert "error: conflicting declaration 'x'" in row.error.message
    row = run("""
        try:
            {}["missing"]
        except KeyError:
            raise ValueError("the model's config is incomplete")
    """)
    assert (row.error.type, row.error.message) == ("ValueError", "the model's config is incomplete")
    torch_own = ("Traceback (most recent call last):\n  File \"a.py\", line 1\nRuntimeError: inner\n\n"
                 "The above exception was the direct cause of the following exception:\n\n"
                 "Traceback (most recent call last):\n  File \"a.py\", line 3\n"
                 "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: inner\n")
    assert last_exception(torch_own) == ("BackendCompilerFailed", "backend='inductor' raised: inner")

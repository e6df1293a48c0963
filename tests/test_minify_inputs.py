"""minify: signatures, config delta debugging, repro cleaning, and bad input (no compiles here)."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from bot.minify.package import clean_source
from bot.minify.worker.configdiff import ddmin, true_diff
from bot.records import CheckError, ConfigEntry
from bot.signature import Signature, message_keys, signature_of_error_record

GCC_A = """CppCompileError: C++ compile error

Command:
g++ /tmp/a/cache/v4/cabc123.main.cpp -O3 -o /tmp/a/cache/v4/cabc123.main.so

Output:
/tmp/a/cache/v4/cabc123.main.cpp:14:33: error: \u2018compile\u2019 was not declared in this scope
   14 |                     auto tmp1 = compile error!;"""

GCC_B = GCC_A.replace("cabc123", "cfff999").replace("14:33", "27:9").replace("tmp1", "tmp7")


def test_compile_errors_from_different_graphs_have_the_same_signature():
    a = Signature("compile_error", "CppCompileError", message_keys(GCC_A))
    b = Signature("compile_error", "CppCompileError", message_keys(GCC_B))
    assert a.messages == ["error: 'compile' was not declared in this scope"]
    assert a.matches(b)


def test_an_other_error_or_an_accuracy_failure_is_not_the_same_failure():
    a = Signature("compile_error", "CppCompileError", message_keys(GCC_A))
    assert not a.matches(Signature("compile_error", "CppCompileError", ["error: expected ';' before 'x'"]))
    assert not a.matches(Signature("runtime_error", "RuntimeError", ["unhandled error"]))
    acc = Signature("accuracy")
    assert acc.matches(Signature("accuracy"))
    assert not acc.matches(Signature("runtime_error", "RuntimeError", ["unhandled error"]))


def test_check_row_error_is_unwrapped_to_the_real_exception():
    sig = signature_of_error_record("compile_error", CheckError(
        type="torch._dynamo.exc.BackendCompilerFailed",
        message="backend='inductor' raised:\nCppCompileError: C++ compile error\n\n" + GCC_A.split("\n", 1)[1]))
    assert sig.exc_type == "CppCompileError"
    assert sig.messages == ["error: 'compile' was not declared in this scope"]


def test_stderr_of_a_repro_run_is_recognised():
    sig = Signature("runtime_error", "RuntimeError", message_keys("unhandled error"))
    assert sig.seen_in("Traceback ...\nRuntimeError: unhandled error\n")
    assert not sig.seen_in("Traceback ...\nRuntimeError: CUDA out of memory\n")
    assert Signature("accuracy").seen_in("torch._dynamo.debug_utils.AccuracyError: Bad accuracy detected")


def test_ddmin_finds_exactly_the_needed_key_among_harmless_overrides():
    keys = ["inductor.compile_threads", "inductor.cpp.inject_relu_bug_TESTING_ONLY", "dynamo.cache_size_limit",
            "inductor.debug", "inductor.max_autotune"]
    calls = []

    def fails(sub):
        calls.append(list(sub))
        return "inductor.cpp.inject_relu_bug_TESTING_ONLY" in sub

    assert ddmin(keys, fails) == ["inductor.cpp.inject_relu_bug_TESTING_ONLY"]
    # two keys that only fail together
    assert sorted(ddmin(keys, lambda s: "inductor.debug" in s and "dynamo.cache_size_limit" in s)) == [
        "dynamo.cache_size_limit", "inductor.debug"]


def test_true_diff_drops_values_equal_to_the_real_default():
    defaults = {"inductor.comprehensive_padding": True, "inductor.cpp.inject_relu_bug_TESTING_ONLY": None}
    diff = true_diff({"inductor.comprehensive_padding": True, "inductor.cpp.inject_relu_bug_TESTING_ONLY": "accuracy",
                      "inductor.fx_graph_cache": False}, defaults.__getitem__, {"inductor.fx_graph_cache"})
    assert diff == [ConfigEntry("inductor.cpp.inject_relu_bug_TESTING_ONLY", None, "accuracy")]


LAUNCHER = textwrap.dedent("""\
    import os
    os.environ['TORCHINDUCTOR_CACHE_DIR'] = '/home/ci/.cache/inductor'
    os.environ['_TORCHINDUCTOR_PYOBJECT_TENSOR_DATA_PTR'] = '139971669969952'
    os.environ.pop('TORCHDYNAMO_REPRO_AFTER', None)

    import torch
    import torch._dynamo.config
    import torch._inductor.config
    import torch._functorch.config
    import torch.fx.experimental._config

    torch._inductor.config.fx_graph_cache = False
    torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'
    torch._inductor.config.comprehensive_padding = True

    isolate_fails_code_str = None

    from torch.nn import *
    class Repro(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()

        def forward(self, addmm_3):
            relu = torch.ops.aten.relu.default(addmm_3);  addmm_3 = None
            return (relu,)

    def load_args(reader):
        buf0 = reader.storage('304e6bf779ca33af9c49dec337233ea85f77313b', 256)
        reader.tensor(buf0, (4, 16), is_leaf=True)  # addmm_3
    load_args._version = 0
    mod = Repro()
    if __name__ == '__main__':
        from torch._dynamo.repro.after_aot import run_repro
        with torch.no_grad():
    """) + ("        run_repro(mod, load_args, accuracy=True, command='minify', "
            "save_dir='/home/ci/run/minifier/checkpoints', tracing_mode='real', check_str=None)\n")


def test_packaged_repro_has_relative_inputs_only_the_needed_config_and_no_machine_lines():
    minimal = [ConfigEntry("inductor.cpp.inject_relu_bug_TESTING_ONLY", None, "accuracy")]
    out = clean_source(LAUNCHER, minimal, standalone=False, name="repro.py")
    assert "/home/ci" not in out and "os.environ[" not in out
    assert "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'" in out
    assert "comprehensive_padding" not in out and "fx_graph_cache" not in out
    assert "save_dir=_INPUTS" in out and "'inputs')" in out
    compile(out, "repro.py", "exec")
    standalone = clean_source(LAUNCHER, minimal, standalone=True, name="repro_standalone.py")
    assert "save_dir=None" in standalone and "_INPUTS" not in standalone


# --- bad input: exit codes and reasons ---------------------------------------------------------


def test_missing_launcher_is_a_usage_error(bot, tmp_path):
    p = bot("minify", "--launcher", tmp_path / "nope.py", "--out", tmp_path / "out")
    assert p.returncode == 2
    assert "cannot read repro file" in p.stderr


def test_corrupt_launcher_is_a_usage_error(bot, tmp_path):
    f = tmp_path / "minifier_launcher.py"
    f.write_text(LAUNCHER[: len(LAUNCHER) // 2] + "\n    def broken(:\n")
    p = bot("minify", "--launcher", f, "--out", tmp_path / "out")
    assert p.returncode == 2
    assert "corrupt or truncated" in p.stderr
    f.write_text("print('hello')\n")
    p = bot("minify", "--launcher", f, "--out", tmp_path / "out")
    assert p.returncode == 2
    assert "not a torch repro" in p.stderr


def test_results_of_an_unknown_schema_version_is_a_usage_error(bot, tmp_path):
    (tmp_path / "results.json").write_text(json.dumps({"schema": "minify-action/results/v9", "checks": []}))
    p = bot("minify", "--out", tmp_path)
    assert p.returncode == 2
    assert "v9" in p.stderr


def test_a_torch_without_the_repro_api_is_an_infrastructure_error(bot, tmp_path):
    fake = tmp_path / "oldtorch" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = '1.13.0'\n")
    f = tmp_path / "minifier_launcher.py"
    f.write_text(LAUNCHER)
    p = bot("minify", "--launcher", f, "--out", tmp_path / "out",
            env={"PYTHONPATH": os.pathsep.join([str(tmp_path / "oldtorch"), str(_root())])})
    assert p.returncode == 3
    assert "too old" in p.stderr


def test_a_passing_check_gets_no_repro_and_the_reason_is_said(bot, tmp_path):
    row = {"id": "mlp_relu-inductor-inference-float32-cpu", "model": "mlp_relu",
           "spec": {"source": "zoo", "model": "mlp_relu"}, "backend": "inductor", "mode": "inference",
           "dtype": "float32", "device": "cpu", "dynamic": False, "config": {}, "status": "pass",
           "failure_class": None, "error": None, "accuracy": None}
    (tmp_path / "results.json").write_text(json.dumps(
        {"schema": "minify-action/results/v1", "settings": {}, "checks": [row]}))
    p = bot("minify", "--out", tmp_path, "--only", row["id"])
    assert p.returncode == 0
    assert "passes, nothing to minify" in p.stderr
    assert not (tmp_path / "failures").exists()
    p = bot("minify", "--out", tmp_path, "--only", "no-such-check")
    assert p.returncode == 2


def _root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_a_wrapper_without_a_cause_is_unwrapped_through_its_message():
    from bot.signature import signature_of_exception

    class InductorError(Exception):
        pass

    sig = signature_of_exception("compile_error", InductorError(GCC_A))
    assert sig.exc_type == "CppCompileError"
    assert sig.matches(Signature("compile_error", "CppCompileError", message_keys(GCC_B)))


def test_a_process_that_aborts_on_a_thrown_cpp_exception_fails_like_the_check_recorded_it():
    from bot.signature import signature_of_abort

    # what check writes when compiled code throws inside an OpenMP region and the process aborts
    row_error = {"type": "UncaughtCppException", "signal": "SIGABRT",
                 "message": "compiled code threw a C++ exception (terminate called after throwing an instance of "
                            "'int'); the process aborted with SIGABRT"}
    original = signature_of_error_record("runtime_error", CheckError.from_json(row_error))
    query = signature_of_abort("...\nterminate called after throwing an instance of 'int'\n", "SIGABRT")
    assert query is not None and original.admits(query) and original.matches(query)
    # a segfault, or an abort for another reason, is not that failure
    assert signature_of_abort("Segmentation fault", "SIGSEGV") is None
    assert signature_of_abort("free(): invalid pointer", "SIGABRT") is None
    other = signature_of_abort("terminate called after throwing an instance of 'std::bad_alloc'", "SIGABRT")
    assert not original.matches(other)
    # several threads threw at once: the second one's line is all that got printed
    both = signature_of_abort("terminate called recursively\n", "SIGABRT")
    assert both is not None and original.matches(both) and original.seen_in("terminate called recursively")
    # a repro run that aborts the same way verifies; one that raises RuntimeError does not
    assert original.seen_in("terminate called after throwing an instance of 'int'\n")
    assert not original.seen_in("RuntimeError: unhandled error\n")


@pytest.mark.slow  # the fork server warms up with one compile
def test_minify_learns_what_torch_offers_in_its_fork_server_and_never_imports_torch_itself(tmp_path):
    """The command's own process does not import torch beside its fork server (a second import
    would take a core for seconds); the facts it records come from a fork of that server."""
    import subprocess
    import sys

    code = ("import sys\n"
            "from bot.commands.minify import preflight\n"
            "from bot.minify.procs import Interpreters\n"
            "with Interpreters(1).start() as servers:\n"
            "    v = preflight(servers)\n"
            "print(v['torch'], bool(v['cxx']), 'torch' in sys.modules)\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, PYTHONPATH=str(_root())))
    import torch

    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == [torch.__version__, "True", "False"], p.stdout


def test_each_query_gets_inputs_with_the_strides_the_graph_was_compiled_for():
    """An expanded (stride-0) input, a channels-last one and a strided slice keep their strides in
    the copies every query runs on: the repro file reads them back with those strides, so the
    worker and `python repro.py` run the same inputs."""
    import torch

    from bot.torch_adapter.fxutil import clone_inputs

    cases = [torch.zeros(1, 8).expand(4, -1), torch.randn(2, 3, 4, 4).to(memory_format=torch.channels_last),
             torch.randn(6, 6)[:, ::2]]
    for x, c in zip(cases, clone_inputs(cases)):
        assert c.stride() == x.stride() and torch.equal(c, x)
        assert c.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()   # a copy, not a view

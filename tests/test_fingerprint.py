"""Fingerprints: the same bug gets the same key across runs; different bugs get different keys."""

from __future__ import annotations

import copy

from bot import fingerprint as fp
from tests.ghstub.rundir import check_row, failure_record, record_of, row_of

TB = '''Traceback (most recent call last):
  File "/opt/venv/lib/python3.11/site-packages/torch/_dynamo/eval_frame.py", line 655, in _fn
    return fn(*args, **kwargs)
  File "/home/ci/src/model.py", line 12, in forward
    return self.net(x)
  File "/opt/venv/lib/python3.11/site-packages/torch/_inductor/codegen/cpp.py", line 901, in codegen_relu
    raise RuntimeError(msg)
  File "/opt/venv/lib/python3.11/site-packages/torch/_inductor/lowering.py", line 77, in wrapped
    out = decomp(*args)
'''


def error_failure(message="shape mismatch at 0x7ffd1234: got 128 expected 64", tb=TB, exc="RuntimeError",
                  model="mlp_relu", **kw):
    c = check_row(model, status="fail_to_run", failure_class="compile_error")
    err = {"type": exc, "message": message, "traceback": tb}
    kw.setdefault("repro_status", "none")
    return c, failure_record(c, error=err, **kw)


def cpp_error(*lines, path="/tmp/torchinductor_ci/ab/cab12.cpp"):
    """A CppCompileError's text as torch 2.13 writes it: the first line is always the same."""
    out = "\n".join(f"{path}:{20 + i}:{7 + i}: error: {line}" for i, line in enumerate(lines))
    return (f"C++ compile error\n\nCommand:\ng++ {path} -shared -fPIC -O3 -o {path[:-4]}.so\n\n"
            f"Output:\n{path}: In function 'void kernel(const float*, float*)':\n{out}\n")


def test_same_accuracy_bug_in_two_runs_and_two_models_has_one_signature():
    c1 = check_row("mlp_relu")
    c2 = check_row("resnet_tiny")
    a = fp.compute(row_of(c1), record_of(failure_record(c1)))
    b = fp.compute(row_of(c2), record_of(failure_record(c2, torch="2.14.0")))
    assert a.primary == b.primary  # same minimized graph, same class/stage/device/dtype
    assert a.check_key != b.check_key  # but different configurations
    assert a.primary.startswith("v2:") and a.parts["basis"] == "culprit"
    assert a.legacy == fp.compute_v1(row_of(c1), record_of(failure_record(c1))).primary and a.legacy.startswith("v1:")


def test_tensor_ranks_and_leftovers_do_not_matter_but_the_culprit_and_dtype_do():
    # v2 (issue 10): the same relu bug on rank-2 and rank-4 tensors, with different leftover views,
    # is one bug; v1 split them
    c = check_row()
    base = fp.compute(row_of(c), record_of(failure_record(c))).primary
    other_rank = [{"op": "aten.relu.default", "dtypes": ["float32"], "ranks": [4]}]
    leftovers = [{"op": "aten.view.default", "dtypes": ["float32"], "ranks": [3]}, *other_rank,
                 {"op": "aten.permute.default", "dtypes": ["float32"], "ranks": [4]}]
    for g in (other_rank, leftovers):
        assert fp.compute(row_of(c), record_of(failure_record(c, graph=g))).primary == base
        assert fp.compute_v1(row_of(c), record_of(failure_record(c, graph=g))).primary != \
            fp.compute_v1(row_of(c), record_of(failure_record(c))).primary
    other_op = [{"op": "aten.sigmoid.default", "dtypes": ["float32"], "ranks": [2]}]
    assert fp.compute(row_of(c), record_of(failure_record(c, graph=other_op))).primary != base
    half = check_row(dtype="float16")
    assert fp.compute(row_of(half), record_of(failure_record(half))).primary != base
    cuda = check_row(device="cuda:1")
    assert fp.compute(row_of(cuda), record_of(failure_record(cuda))).parts["device"] == "cuda"


def test_the_culprit_and_bisector_answer_come_before_the_leftover_graph():
    c = check_row()
    g_small = [{"op": "aten.relu.default", "dtypes": ["float32"], "ranks": [2]}]
    g_big = g_small + [{"op": "aten._scaled_dot_product_flash_attention_for_cpu.default", "dtypes": ["float32"],
                        "ranks": [4]}, {"op": "aten.add.Tensor", "dtypes": ["float32"], "ranks": [3]}]
    bisect = {"backend": "inductor", "subsystem": "lowerings", "bisect_number": 7, "detail": "relu", "runs": 16}
    a, b = failure_record(c, graph=g_small), failure_record(c, graph=g_big)
    # op sets differ, nothing better known
    assert fp.compute(row_of(c), record_of(a)).primary != fp.compute(row_of(c), record_of(b)).primary
    a["bisect"], b["bisect"] = bisect, dict(bisect, bisect_number=3)
    assert fp.compute(row_of(c), record_of(a)).primary == fp.compute(row_of(c), record_of(b)).primary
    assert fp.compute(row_of(c), record_of(a)).parts["bisect"] == "lowerings: relu"
    # the culprit field (ops that fail compiled alone) is read when present
    a["culprit"] = {"ops": ["aten.relu.default"], "bisect": "lowerings: relu", "method": "compiled-alone"}
    b["culprit"] = {"ops": ["aten.log1p.default"], "bisect": "lowerings: log1p", "method": "compiled-alone"}
    assert fp.compute(row_of(c), record_of(a)).parts["ops"] == ["aten.relu.default"]
    assert fp.compute(row_of(c), record_of(a)).primary != fp.compute(row_of(c), record_of(b)).primary
    # the signature minify verified is what the fingerprint uses
    from bot.signature import Signature
    a["signature"] = Signature("accuracy", stage="inductor", device="cpu", dtype="float32",
                               culprit_ops=["aten.relu.default"], bisect="lowerings: relu", verified=True).to_json()
    assert fp.compute(row_of(c), record_of(a)).signature.culprit == {"ops": ["aten.relu.default"],
                                                                     "bisect": "lowerings: relu"}


def test_unverified_repro_is_identified_by_its_model_and_only_then_has_the_model_alternative():
    c = check_row()
    verified = fp.compute(row_of(c), record_of(failure_record(c)))
    assert verified.has_repro and verified.alternatives == []
    unverified = fp.compute(row_of(c), record_of(failure_record(c, repro_status="not_reproduced")))
    assert not unverified.has_repro and unverified.parts["basis"] == "model"
    assert [a.split(":")[0] for a in unverified.alternatives] == ["v2-model"]


def test_compile_errors_are_told_apart_by_every_error_line_not_the_first_line():
    relu = cpp_error("'compile' was not declared in this scope", "expected ';' before 'error'")
    other = cpp_error("'tmp3' was not declared in this scope")
    c1, f1 = error_failure(relu, exc="CppCompileError")
    c2, f2 = error_failure(other, exc="CppCompileError", model="conv_bn")
    # v1: "C++ compile error"
    assert fp.compute_v1(row_of(c1), record_of(f1)).primary == fp.compute_v1(row_of(c2), record_of(f2)).primary
    a, b = fp.compute(row_of(c1), record_of(f1)), fp.compute(row_of(c2), record_of(f2))
    assert a.primary != b.primary
    assert a.parts["messages"] == ["error: 'compile' was not declared in this scope",
                                   "error: expected ';' before 'error'"]
    assert b.parts["messages"] == ["error: 'tmpN' was not declared in this scope"]
    # the same error in another model, other paths, other line numbers, another kernel name: same bug
    c3, f3 = error_failure(cpp_error("'compile' was not declared in this scope", "expected ';' before 'error'",
                                     path="/home/u/.cache/x/zz/czz99.cpp"), exc="CppCompileError", model="resblock")
    assert fp.compute(row_of(c3), record_of(f3)).primary == a.primary
    assert "frames" not in a.parts  # the compiler's words identify it, not where python was


# one genuine bug (torch 2.15, CPU: ``torch.sum(x, dims, dtype=torch.bool)`` does not compile) as the
# compiler words it for four input dtypes
SUM_TO_BOOL = {
    "uint8": "no matching function for call to 'sum_masked_reduce(at::vec::CPU_CAPABILITY::VecMask<float, 1>&, "
             "at::vec::CPU_CAPABILITY::VecMask<unsigned char, 1>&, int64_t)'",
    "float32": "no match for 'operator+' (operand types are 'at::vec::CPU_CAPABILITY::VecMask<float, 1>' and "
               "'at::vec::CPU_CAPABILITY::VecMask<float, 1>')",
    "float64": "no matching function for call to 'sum_masked_reduce(at::vec::CPU_CAPABILITY::VecMask<float, 1>&, "
               "at::vec::CPU_CAPABILITY::VecMask<double, 2>&, int64_t)'",
    "int8": "no match for 'operator|' (operand types are 'at::vec::CPU_CAPABILITY::VecMask<float, 1>' and "
            "'at::vec::CPU_CAPABILITY::VecMask<signed char, 1>')",
}


def compile_error_with_culprit(words, input_dtype="float32", op="aten.sum.dim_IntList", method="compiled-alone",
                               model=None, **kw):
    """A generated-code compile error whose verified repro found ``op`` (failing compiled alone)."""
    c, f = error_failure(cpp_error(words), exc="CppCompileError", model=model or f"fuzz-{input_dtype}",
                         graph=[{"op": op, "dtypes": [input_dtype], "ranks": [2]}],
                         repro_status=kw.pop("repro_status", "minimized"), **kw)
    f["culprit"] = {"ops": [op], "bisect": f"lowerings: {op.split('.')[1]}_1", "method": method}
    return c, f


def test_one_op_failing_to_compile_is_one_bug_whatever_the_compiler_says_for_each_input_dtype():
    found = [fp.compute(row_of(c), record_of(f))
             for c, f in (compile_error_with_culprit(w, d) for d, w in SUM_TO_BOOL.items())]
    assert len({f.primary for f in found}) == 1
    assert found[0].parts["basis"] == "culprit" and "messages" not in found[0].parts
    assert found[0].parts["ops"] == ["aten.sum.dim_IntList"] and found[0].parts["exception"] == "CppCompileError"
    # each keeps the key its compiler's words gave it (how issues filed under those words are found)
    assert len({k for f in found for k in f.former}) == 4
    assert found[0].former == [fp.compute(row_of(c), record_of(f)).primary for c, f in
                               [compile_error_with_culprit(SUM_TO_BOOL["uint8"], "uint8", method="graph")]]
    # another op failing with the same words is another bug
    c, f = compile_error_with_culprit(SUM_TO_BOOL["uint8"], "uint8", op="aten.prod.dim_int")
    assert fp.compute(row_of(c), record_of(f)).primary != found[0].primary
    # without the op found alone, or without a verified repro, the compiler's words are the key
    for kw in ({"method": "graph"}, {"repro_status": "not_reproduced"}):
        split = {fp.compute(row_of(c), record_of(f)).primary
                 for c, f in (compile_error_with_culprit(w, d, **kw) for d, w in SUM_TO_BOOL.items())}
        assert len(split) == 4, kw
    # a Python exception's words in a culprit op stay part of its key (not the compiler's words)
    c1, f1 = error_failure("expected a 4-d tensor", exc="RuntimeError", repro_status="minimized")
    c2, f2 = error_failure("dtype mismatch", exc="RuntimeError", repro_status="minimized")
    for f in (f1, f2):
        f["culprit"] = {"ops": ["aten.lerp.Tensor"], "bisect": None, "method": "compiled-alone"}
    assert fp.compute(row_of(c1), record_of(f1)).primary != fp.compute(row_of(c2), record_of(f2)).primary


def test_error_signature_ignores_addresses_numbers_paths_and_glue_frames():
    c, f = error_failure()
    c2, f2 = error_failure(message="shape mismatch at 0x55aa00ff: got 256 expected 32",
                           tb=TB.replace("/opt/venv", "/usr/local").replace("line 901", "line 950"))
    a, b = fp.compute(row_of(c), record_of(f)), fp.compute(row_of(c2), record_of(f2))
    assert a.primary == b.primary
    assert a.parts["frames"] == ["lowering.py:wrapped", "cpp.py:codegen_relu", "model.py:forward"]
    assert "eval_frame" not in str(a.parts["frames"])
    c3, f3 = error_failure(exc="AssertionError")
    assert fp.compute(row_of(c3), record_of(f3)).primary != a.primary
    c4, f4 = error_failure(message="a completely different complaint")
    assert fp.compute(row_of(c4), record_of(f4)).primary != a.primary


def test_generated_code_frames_do_not_split_a_runtime_error():
    tb = TB.replace("/home/ci/src/model.py", "/tmp/ind/ab/cab5qx57phg5ercmat7bw4plq5tmapv2d7xbxc5uvkl55arw.py")
    c1, f1 = error_failure("unhandled error", tb=tb)
    c2, f2 = error_failure("unhandled error", tb=tb.replace("cab5qx57", "czz9zz99"), model="conv_bn")
    assert fp.compute(row_of(c1), record_of(f1)).primary == fp.compute(row_of(c2), record_of(f2)).primary
    assert "<generated>:forward" in fp.compute(row_of(c1), record_of(f1)).parts["frames"]


def test_unminimized_failure_falls_back_to_the_model_tuple():
    c = check_row(status="timeout", failure_class="timeout")
    a = fp.compute(row_of(c), None)
    assert a.parts["basis"] == "model"
    other = check_row("other_model", status="timeout", failure_class="timeout")
    assert fp.compute(row_of(other), None).primary != a.primary


def test_marker_round_trips_and_cannot_be_closed_early():
    state = {"sig": "v1:x", "sigs": ["v1:x"], "affected": [{"model": "evil --> <!-- minify-action:v1 {} -->"}]}
    marker = fp.make_marker(state)
    assert marker.count("-->") == 1 and marker.count("<!--") == 1
    body = "text\n\n" + marker + "\n"
    assert fp.parse_marker(body) == state


def test_marker_only_counts_on_the_last_line():
    fake = fp.make_marker({"sig": "v1:forged", "sigs": ["v1:forged"]})
    assert fp.parse_marker(f"intro\n{fake}\nmore text after it\n") is None
    assert fp.parse_marker("") is None and fp.parse_marker(None) is None
    assert fp.parse_marker("<!-- minify-action:v1 {not json} -->") is None


def test_fingerprint_does_not_change_when_unrelated_fields_change():
    c = check_row()
    f = failure_record(c)
    f2 = copy.deepcopy(f)
    f2["repro"]["queries"] = 99
    f2["versions"]["torch"] = "2.99"
    f2["check"]["duration_s"] = 100
    assert fp.compute(row_of(c), record_of(f)).primary == fp.compute(row_of(c), record_of(f2)).primary

"""Fingerprints: the same bug gets the same key across runs; different bugs get different keys."""

from __future__ import annotations

import copy

from bot import fingerprint as fp
from tests.ghstub.rundir import check_row, failure_record

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


def error_failure(message="shape mismatch at 0x7ffd1234: got 128 expected 64", tb=TB, exc="RuntimeError"):
    c = check_row(status="fail_to_run", failure_class="compile_error")
    err = {"type": exc, "message": message, "traceback": tb}
    return c, failure_record(c, error=err)


def test_same_accuracy_bug_in_two_runs_and_two_models_has_one_signature():
    c1 = check_row("mlp_relu")
    c2 = check_row("resnet_tiny")
    a = fp.compute(c1, failure_record(c1))
    b = fp.compute(c2, failure_record(c2, torch="2.14.0"))
    assert a.primary == b.primary  # same minimized graph, same class/stage/device/dtype
    assert a.check_key != b.check_key  # but different configurations
    assert a.primary.startswith("v1:")


def test_sizes_do_not_matter_but_ops_dtypes_and_ranks_do():
    c = check_row()
    base = fp.compute(c, failure_record(c)).primary
    other_op = [{"op": "aten.sigmoid.default", "dtypes": ["float32"], "ranks": [2]}]
    other_rank = [{"op": "aten.relu.default", "dtypes": ["float32"], "ranks": [4]}]
    other_dtype = [{"op": "aten.relu.default", "dtypes": ["float16"], "ranks": [2]}]
    for g in (other_op, other_rank, other_dtype):
        assert fp.compute(c, failure_record(c, graph=g)).primary != base
    cuda = check_row(device="cuda:1")
    assert fp.compute(cuda, failure_record(cuda)).parts["device"] == "cuda"


def test_op_multiset_alternative_ignores_order():
    c = check_row()
    g1 = [{"op": "aten.add.Tensor", "dtypes": ["float32"], "ranks": [2]}, {"op": "aten.relu.default", "dtypes": ["float32"], "ranks": [2]}]
    a = fp.compute(c, failure_record(c, graph=g1))
    b = fp.compute(c, failure_record(c, graph=list(reversed(g1))))
    assert a.primary != b.primary
    assert a.alternatives[0] == b.alternatives[0] and a.alternatives[0].startswith("v1-ops:")


def test_error_signature_ignores_addresses_numbers_paths_and_glue_frames():
    c, f = error_failure()
    c2, f2 = error_failure(message="shape mismatch at 0x55aa00ff: got 256 expected 32",
                           tb=TB.replace("/opt/venv", "/usr/local").replace("line 901", "line 950"))
    a, b = fp.compute(c, f), fp.compute(c2, f2)
    assert a.primary == b.primary
    assert a.parts["frames"] == ["lowering.py:wrapped", "cpp.py:codegen_relu", "model.py:forward"]
    assert "eval_frame" not in str(a.parts["frames"])
    c3, f3 = error_failure(exc="AssertionError")
    assert fp.compute(c3, f3).primary != a.primary
    c4, f4 = error_failure(message="a completely different complaint")
    assert fp.compute(c4, f4).primary != a.primary


def test_unminimized_failure_falls_back_to_the_model_tuple():
    c = check_row(status="timeout", failure_class="timeout")
    a = fp.compute(c, None)
    assert a.parts["basis"] == "model"
    other = check_row("other_model", status="timeout", failure_class="timeout")
    assert fp.compute(other, None).primary != a.primary


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
    assert fp.compute(c, f).primary == fp.compute(c, f2).primary

"""bot/signature.py: one definition of a failure's signature, for check, minify, verify and the
fingerprint. Pure data: no torch."""

from __future__ import annotations

from bot import signature as sg
from bot.failure import signature_of
from bot.records import CheckError
from tests.ghstub.rundir import check_row, failure_record, record_of, row_of

CPP = ("C++ compile error\n\nCommand:\ng++ /tmp/torchinductor_u/ab/cab.cpp -o /tmp/x.so\n\nOutput:\n"
       "/tmp/torchinductor_u/ab/cab.cpp: In function 'void cpp_fused_relu_0(float*)':\n"
       "/tmp/torchinductor_u/ab/cab.cpp:12:38: error: 'compile' was not declared in this scope\n"
       "/tmp/torchinductor_u/ab/cab.cpp:12:45: error: expected ';' before 'error'\n"
       "/tmp/torchinductor_u/ab/cab.cpp:30:1: error: 'tmp7' was not declared in this scope\n")


def test_compiler_messages_are_every_error_line_normalized():
    keys = sg.message_keys(CPP)
    assert keys == ["error: 'compile' was not declared in this scope", "error: 'tmpN' was not declared in this scope",
                    "error: expected ';' before 'error'"]
    assert sg.normalize_line("in cpp_fused_relu_0 at /a/b.cpp:12:38 0x7ffd12 float32 log1p") == \
        "in cpp_fused_relu_N at <path>:N:N <hex> float32 log1p"


def test_the_row_error_the_exception_and_the_stored_signature_agree():
    class CppCompileError(RuntimeError):
        pass

    class BackendCompilerFailed(Exception):
        pass

    try:
        try:
            raise CppCompileError(CPP)
        except CppCompileError as inner:
            raise BackendCompilerFailed("backend='inductor' raised:\nCppCompileError: " + CPP) from inner
    except BackendCompilerFailed as exc:
        from_exc = sg.signature_of_exception("compile_error", exc)
    from_row = sg.signature_of_error_record("compile_error", CheckError(type="BackendCompilerFailed",
                                                                        message="backend='inductor' raised:\n"
                                                                                "CppCompileError: " + CPP))
    assert from_exc.matches(from_row) and (from_exc.exc_type, from_exc.messages) == (from_row.exc_type,
                                                                                      from_row.messages)
    stored = sg.Signature.from_json(from_exc.to_json())
    assert stored == from_exc
    # an old three-key pinned signature still reads
    assert sg.Signature.from_json({"failure_class": "accuracy", "exc_type": None, "messages": []}).matches(
        sg.Signature("accuracy"))


def test_the_culprit_comes_first_then_the_bisector_then_the_graphs_op_names():
    c = check_row()
    graph = [{"op": "aten.view.default", "dtypes": ["float32"], "ranks": [3]},
             {"op": "aten.relu.default", "dtypes": ["float32"], "ranks": [3]}]
    rec = failure_record(c, graph=graph)
    assert record_of(rec).culprit_found() == (["aten.relu.default"], None, "graph")
    rec["bisect"] = {"incomplete": True, "runs": 4, "detail": "stopped after 60 s"}
    assert record_of(rec).culprit_found()[2] == "graph"  # an unfinished bisection says nothing
    rec["bisect"] = {"backend": "inductor", "subsystem": "lowerings", "bisect_number": 3, "detail": "relu", "runs": 9}
    assert record_of(rec).culprit_found() == ([], "lowerings: relu", "bisector")
    rec["culprit"] = {"ops": ["aten.relu.default"], "bisect": "lowerings: relu", "method": "compiled-alone"}
    assert record_of(rec).culprit_found() == (["aten.relu.default"], "lowerings: relu", "compiled-alone")


def test_a_record_without_a_verified_repro_has_no_culprit():
    c = check_row()
    sig = signature_of(row_of(c), record_of(failure_record(c, repro_status="not_reproduced")))
    assert not sig.verified and sig.culprit is None
    sig = signature_of(row_of(c), record_of(failure_record(c)))
    assert sig.verified and sig.culprit == {"ops": ["aten.relu.default"], "bisect": None}
    assert (sig.stage, sig.device, sig.dtype) == ("inductor", "cpu", "float32")
    assert signature_of(row_of(c), None).stage == "unlocalized"


def test_abort_output_is_one_rule_for_check_and_minify():
    import signal

    from bot.check.isolate import _interpret
    from bot.proc import Result
    from bot.suites.classify import classify

    for text, kind in (("terminate called recursively\n", "abort"), ("free(): invalid pointer\n", "crash")):
        death = sg.death_of(signal.SIGABRT, text)
        assert death.kind == kind and death.signal == "SIGABRT"
        row = _interpret(Result(-6, 1.0, tail=text, signal=6, signal_name="SIGABRT"), "compile", 60)
        assert row.failure_class == ("runtime_error" if kind == "abort" else "crash")
        assert classify(returncode=-6, output=text).failure_class == row.failure_class
    assert sg.death_of(signal.SIGABRT, "terminate called recursively\n", compiled=False).kind == "crash"
    assert sg.death_of(signal.SIGKILL, "").kind == "oom" and sg.death_of(signal.SIGSEGV, "").signal == "SIGSEGV"
    assert sg.signal_name(250) == "250"
    # other aborting threads write into the middle of the first one's line
    line = "terminate called after throwing an instance of "
    raced = sg.signature_of_abort(line + "'terminate called recursively\nint'\n")
    assert raced.messages == [line + "'int'"]
    for torn in (line + "'\nint'\n", line + "'int" + line + "''\nint\n"):   # an abort still, of a type unread
        assert sg.signature_of_abort(torn).messages == [] and sg.signature_of_abort(torn).matches(raced)
    assert sg.death_of(signal.SIGABRT, "terminate called after throwing an instance of 'terminate called "
                       "recursively\nint'").thrown == "terminate called after throwing an instance of 'int'"
    out = "terminate called after throwing an instance of 'int'\n"
    assert sg.signature_of_abort(out).matches(sg.signature_of_abort("terminate called recursively\n"))
    # however the OpenMP threads raced, it is the same abort
    assert sg.signature_of_abort(out).matches(sg.signature_of_abort("terminate called without an active exception\n"))

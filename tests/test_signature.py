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


# --------------------------------------------------------------------------- Triton compile errors

# an inductor kernel as Triton's code generator sees it (CompilationError quotes it up to the line)
KERNEL = """def triton_poi_fused_add_0(in_ptr0, in_ptr1, out_ptr0, xnumel, XBLOCK : tl.constexpr):
    xnumel = 16
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    x0 = xindex
    tmp0 = tl.load(in_ptr0 + (x0), xmask)
    tmp1 = tl.load(in_ptr1 + (tl.arange(0, 16)[None, :]), None)
    tmp2 = tmp0 + tmp1
    tmp3 = triton_helpers.maximum(tmp2, tmp0)
    tl.store(out_ptr0 + (x0), tmp3, xmask)"""
BROADCAST = "ValueError('Cannot broadcast, rank mismatch: [16], [1, 16]')"
POINTER = "ValueError('Unsupported ptr type <[16], int64> in `tl.load`')"
# a literal one, as triton.compiler.errors.CompilationError.__str__ writes it
HELPER = "@triton.jit\ndef maximum(a, b):\n    return tl.maximum(a, b)"
LITERAL = ("at 7:15:\n    x = tl.load(in_ptr0 + xindex)\n               ^\n"
           "ValueError('Cannot broadcast, rank mismatch: [32], [1, 32]')")


def triton_message(lineno: int, col: int, error: str | None, src: str = KERNEL) -> str:
    """Triton's CompilationError message: position, the source up to its line, a caret, the error."""
    excerpt = src.split("\n")[:lineno][-12:] + [" " * col + "^"]
    return f"at {lineno}:{col}:\n" + "\n".join(excerpt) + (f"\n{error}" if error else "")


def inductor_row(message: str, wrapper: str = "InductorError") -> sg.Signature:
    """The check row of a program whose inductor compile raised it (inductor's wrapper's text)."""
    error = CheckError(type=wrapper, message="CompilationError: " + message)
    return sg.signature_of_error_record("compile_error", error)


def test_two_different_triton_compile_errors_are_not_the_same_failure():
    """Every Triton compile error starts "at N:N:": keyed on that, a rank mismatch and a bad pointer
    "failed the same way" and minimization could drift from one bug to the other."""
    broadcast, pointer = inductor_row(triton_message(9, 11, BROADCAST)), inductor_row(triton_message(7, 11, POINTER))
    assert broadcast.exc_type == pointer.exc_type == "CompilationError"
    assert broadcast.messages == ["ValueError('Cannot broadcast, rank mismatch: [N], [N, N]')"]
    assert not broadcast.matches(pointer) and not pointer.matches(broadcast)
    assert not broadcast.admits(pointer)
    assert inductor_row(LITERAL).messages == broadcast.messages
    assert broadcast.describe() == "compile_error CompilationError: ValueError('Cannot broadcast, rank mismatch: " \
                                   "[N], [N, N]')"


def test_the_same_triton_error_elsewhere_in_the_kernel_is_the_same_failure():
    """A minimized graph's kernel is shorter: the error moves to another line and column."""
    shorter = "\n".join(line for line in KERNEL.split("\n") if "xmask = " not in line).replace("(x0)", "x0")
    here = inductor_row(triton_message(9, 11, BROADCAST))
    there = inductor_row(triton_message(8, 15, BROADCAST, shorter))
    assert here.matches(there) and there.matches(here)
    # and a repro whose stderr shows it at yet another place shows this failure; another error does not
    stderr = ("Traceback (most recent call last):\n  File \"repro.py\", line 40, in <module>\n    mod(*args)\n"
              "torch._inductor.exc.InductorError: CompilationError: " + triton_message(3, 4, BROADCAST, shorter) + "\n")
    assert here.seen_in(stderr) and here.fails_run(1, stderr)
    assert not inductor_row(triton_message(7, 11, POINTER)).seen_in(stderr)


class CompilationError(Exception):
    """Triton's, as raised by its code generator (its module named as Triton's)."""

    def __init__(self, lineno: int, col: int, error: str | None, src: str = KERNEL):
        super().__init__(triton_message(lineno, col, error, src))


CompilationError.__module__ = "triton.compiler.errors"


class InductorError(Exception):
    def __init__(self, inner: Exception):
        super().__init__(f"{type(inner).__name__}: {inner}")
        self.inner_exception = inner


class SubprocException(Exception):
    def __init__(self, details: str, name: str = "<unknown>"):
        super().__init__(f"An exception occurred in a subprocess:\n\nName={name}\n{details}")


def _pool_text(error: str | None, nested: bool = False) -> str:
    """What the compile pool's worker sends back: its traceback as text (``traceback.format_exc``)."""
    import traceback

    try:
        try:
            raise CompilationError(3, 11, error, HELPER)        # inside triton_helpers.maximum
        except CompilationError as inner:
            if not nested:
                raise
            raise CompilationError(10, 11, None) from inner   # the call in the kernel that reached it
    except CompilationError:
        return traceback.format_exc()


def test_a_triton_error_reads_alike_from_the_exception_the_row_and_the_compile_pool():
    in_process = sg.signature_of_exception("compile_error", InductorError(CompilationError(9, 11, BROADCAST)))
    assert in_process.exc_type == "CompilationError"
    assert in_process.matches(inductor_row(triton_message(9, 11, BROADCAST)))
    for nested in (False, True):
        pool = InductorError(SubprocException(_pool_text(BROADCAST, nested), "triton_poi_fused_add_0"))
        from_exc = sg.signature_of_exception("compile_error", pool)
        from_row = sg.signature_of_error_record("compile_error", CheckError(type="InductorError", message=str(pool)))
        assert from_exc.exc_type == from_row.exc_type == "CompilationError"
        assert from_exc.matches(in_process) and from_row.matches(in_process)
        other = InductorError(SubprocException(_pool_text(POINTER, nested), "triton_poi_fused_add_0"))
        assert not sg.signature_of_exception("compile_error", other).matches(in_process)
    # in-process, an error inside a called @triton.jit function is the call's error without an error
    # line (the error is its cause): keyed on the call, which the pool's traceback also holds
    call = sg.signature_of_exception("compile_error", InductorError(CompilationError(10, 11, None)))
    assert call.messages == ["tmpN = triton_helpers.maximum(tmpN, tmpN)"]
    pool = InductorError(SubprocException(_pool_text(BROADCAST, nested=True)))
    assert sg.signature_of_exception("compile_error", pool).matches(call)
    assert sg.message_keys(str(pool)) == sorted([in_process.messages[0], call.messages[0]])


def test_a_program_that_printed_no_exception_admits_any_error_its_graph_raises():
    """A benchmark that catches the compile error and says so in its own words ("pooler: compile
    failed: ...") leaves the check only its exit status (and the class its output showed): the
    captured graph's CppCompileError is that failure, not another one. An accuracy failure is
    still no compile error, and a program that did print its exception still pins its type."""
    from bot.suites.classify import classify

    out = "stem: ok\npooler: compile failed: InductorError: CppCompileError: C++ compile error\nFAILED: pooler\n"
    row = classify(returncode=1, output=out)
    check = sg.signature_of_error_record(row.failure_class, row.error)
    assert (row.failure_class, check.exc_type) == ("compile_error", sg.EXIT_TYPE)
    captured = sg.Signature("compile_error", "CppCompileError", ["error: conflicting declaration 'auto tmpN'"])
    assert check.admits(captured)
    assert check.admits(sg.Signature("runtime_error", "RuntimeError", ["index out of bounds"]))
    assert not check.admits(sg.Signature("accuracy"))
    printed = sg.signature_of_error_record("compile_error", CheckError(type="InductorError", message=(
        "CppCompileError: C++ compile error\nerror: 'x' was not declared in this scope")))
    assert not printed.admits(captured)

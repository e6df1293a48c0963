"""What "the same failure" means, in one place: check, minify, verify, fingerprint and report use it.

A failure's signature (``Signature``) says *how* it fails and, once minify has proved it, *where*:

- how: the failure class, the exception type (the most specific one in the chain, with torch's
  wrapper exceptions skipped) and the normalized compiler messages: every ``error:`` line of a
  compiler error (or the first line when there is none; for a Triton compile error, whose first
  line is only a position in the kernel, its error line), with paths, line numbers, addresses,
  hashes, temporary names and the numbers in kernel names removed. An accuracy failure's "how" is
  just its class: a candidate that raises does *not* fail that way (so minification cannot drift
  from a wrong result to a crash). ``Signature.matches`` compares only this part: it is the
  predicate the minifier pins and the check that verification runs.
- context: the stage that first fails, the device type (cuda:1 -> cuda) and the dtype.
- where: the culprit op(s) and the bisector's one-line answer, when minify found them, and whether
  fresh-process runs of the minimized repro verified the failure (``verified``).

Minify writes the verified signature to failure.json ("signature"); :func:`bot.failure.signature_of`
reads it back, or derives one from an older record by these rules (the check row's error, the
record's culprit / bisect / graph).
The fingerprint (bot/fingerprint.py) is computed from it.

Pure Python; no torch import.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from bot.records import Accuracy, CheckError, CheckRow, GraphBisect

ERROR_CLASSES = ("compile_error", "runtime_error")
MINIFIABLE_CLASSES = ("accuracy", "compile_error", "runtime_error", "crash")
# the model or program fails without the compiler (it cannot be set up, or eager itself fails or
# varies): on the dashboard, never filed as a compiler bug
NOT_COMPILER_CLASSES = ("setup_error", "eager_error")

# Exceptions that only wrap the real one.
WRAPPERS = {
    "BackendCompilerFailed", "InductorError", "TorchRuntimeError", "InternalTorchDynamoError",
    "CalledProcessError", "SubprocException", "UncapturedHigherOrderOpError",
}

# A C++ exception thrown by compiled code inside an OpenMP region cannot propagate: the runtime
# calls std::terminate and the process aborts. ``check`` records that as a runtime error of type
# UncaughtCppException; a minify query or a repro run that dies the same way fails the same way.
ABORT_TYPE = "UncaughtCppException"
# A program that failed without printing an exception (it caught one and said so in its own words,
# or just exited non-zero): ``check`` records its exit status as the error, of this type.
EXIT_TYPE = "ExitCode"
UNCAUGHT_CPP = re.compile(r"terminate called after throwing an instance of '[^'\n]*'")
# what other OpenMP threads write while the first one reports: it can land inside that line
_OTHER_TERMINATE = r"terminate called (?:recursively|without an active exception)"
_INTERLEAVED = re.compile(_OTHER_TERMINATE + r"\s*")
# ... or several OpenMP threads threw at once and the abort came before the first one's line
# (libstdc++'s handler prints one of these; which one depends on how the threads raced)
ABORT_OUTPUT = re.compile(r"terminate called after throwing an instance of|" + _OTHER_TERMINATE)

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "`": "'"})


def normalize_line(line: str) -> str:
    s = line.translate(_QUOTES)
    s = re.sub(r"(?:[A-Za-z]:)?(?:/[^\s:'\"]+)+", "<path>", s)       # paths
    s = re.sub(r"0x[0-9a-fA-F]+", "<hex>", s)
    s = re.sub(r"\b[0-9a-f]{16,}\b", "<hash>", s)
    s = re.sub(r"\b(tmp|buf|arg|primals|tangents|getitem|x|in_ptr|out_ptr|in_out_ptr|ks|s)\d+(_\d+)?\b",
               r"\1N", s)
    s = re.sub(r"(?<![\w.])\d+(\.\d+)?(?![A-Za-z])|(?<=_)\d+\b", "N", s)  # numbers; kernel_name_0
    s = re.sub(r"\s+", " ", s).strip()
    return s[:300]


# Triton's CompilationError: "at {line}:{col}:", the kernel's source up to that line, a caret line
# under the column (or "<source unavailable>"), then the error (``repr`` of the exception that the
# code generator met; none when it only wraps an error inside a called @triton.jit function).
# The position line may come after the exception types that wrap it
# ("InductorError: CompilationError: at 12:34:", "triton.compiler.errors.CompilationError: at 7:15:").
_TRITON_AT = re.compile(r"(?:[\w.]+: )*at \d+:\d+:")
_TRITON_EXCERPT_END = re.compile(r"\^|<source (?:unavailable|empty)>")
# what a wrapper or a traceback writes after an error that had no error line (not the error)
_NOT_TRITONS = re.compile(r"Set TORCHDYNAMO_VERBOSE|from user code:|The above exception|During handling of|"
                          r"Traceback \(most recent call last\)|You can suppress")


def _triton_keys(lines: list[str]) -> list[str]:
    """The keys of Triton compile errors: its position line says only where in the kernel the error
    is (every Triton error has one), so each error is keyed on its error line. A traceback (the
    compile pool's) may hold several, an error and the call in the kernel that reached it: each one
    is a key, so the same error read in-process (the call's error alone) still overlaps."""
    starts = [i for i, line in enumerate(lines) if _TRITON_AT.fullmatch(line.strip())]
    keys = []
    for n, start in enumerate(starts):
        block = lines[start + 1:starts[n + 1] if n + 1 < len(starts) else len(lines)]
        end = next((i for i, line in enumerate(block) if _TRITON_EXCERPT_END.fullmatch(line.strip())), None)
        if end is None:
            continue
        if end + 1 < len(block) and not _NOT_TRITONS.match(block[end + 1].strip()):
            keys.append(normalize_line(block[end + 1]))        # the error
        elif end > 0:
            keys.append(normalize_line(block[end - 1]))        # no error: the source line it points at
    return sorted(set(k for k in keys if k))


def message_keys(message: str | None) -> list[str]:
    """The normalized lines that identify an error message."""
    if not message:
        return []
    lines = [line for line in message.splitlines() if line.strip()]
    diag = []
    for line in lines:
        m = re.search(r"\b(error|fatal error): (.*)$", line)
        if m and not line.lstrip().startswith(("Command", "Output")):
            diag.append(normalize_line(f"{m.group(1)}: {m.group(2)}"))
    if diag:
        return sorted(set(diag))
    triton = _triton_keys(lines)
    if triton:
        return triton
    # first line, without a leading "SomeError: " that repeats the type
    first = re.sub(r"^[\w.]+(Error|Exception|Failed): ", "", lines[0].strip()) if lines else ""
    return [normalize_line(first)] if first else []


def first_compiler_error(message: str | None) -> str | None:
    """The first ``error:`` line of a compiler's output in ``message``, as the compiler wrote it
    after ``error:`` (``fatal error: ...`` kept whole; no file and position): what a person quotes
    of a C++ compile error. None when the message holds no compiler error line."""
    for line in (message or "").splitlines():
        m = re.search(r"\b((?:fatal )?error): (.*)$", line)
        if m and m.group(2).strip() and not line.lstrip().startswith(("Command", "Output")):
            said = m.group(2).strip().translate(_QUOTES)
            return said if m.group(1) == "error" else f"{m.group(1)}: {said}"
    return None


# one compiler warning as gcc and clang write it: the ``file:line:col: warning: ...`` line and the
# source lines under it (``  243 |   0xff, ...`` and the ``      |   ^~~~`` marker)
_WARNING_TAIL = re.compile(r"\A(?:[ \t]*\d*[ \t]*\|[^\n]*\n)+")
_COMPILER_WARNING = re.compile(r"^[^\n]*:\d+(?::\d+)?: warning: [^\n]*\n(?:[ \t]*\d*[ \t]*\|[^\n]*(?:\n|$))*", re.M)


def without_compiler_warnings(text: str) -> str:
    """``text`` without a compiler's warnings (a C++ compile error's output often ends in a screen
    of ``-Woverflow`` warnings from torch's own headers, which say nothing of the error), and a
    line saying how many went; the errors and their notes stay."""
    if ": warning: " not in (text or ""):
        return text
    n = len(_COMPILER_WARNING.findall(text))
    if not n:
        return text
    out = _WARNING_TAIL.sub("", _COMPILER_WARNING.sub("", text))   # and a kept tail that starts inside one
    said = f"({n} compiler warning{'s' if n != 1 else ''} left out)"
    return out.rstrip("\n") + "\n" + said + ("\n" if text.endswith("\n") else "")


# torch's C++ compile error: "C++ compile error", "Command:" and the compiler's whole command line
# (include paths, flags: the same for every kernel), then "Output:" and what the compiler said
_COMPILE_COMMAND = re.compile(r"^([ \t]*)Command:[ \t]*\n"
                              r"(?:(?![ \t]*Output:[ \t]*$)[^\n]*\n)+?(?=[ \t]*Output:[ \t]*$)", re.M)


def without_compile_command(text: str) -> str:
    """``text`` without a C++ compile error's ``Command:`` block (one long line of include paths and
    flags, the same for every kernel; the failure record keeps it), and a line saying where it went;
    the compiler's ``Output:`` stays."""
    if "Command:" not in (text or ""):
        return text
    return _COMPILE_COMMAND.sub(r"\1(the compiler's command line is in failure.json in the artifacts)\n", text)


def short_type(name: str | None) -> str | None:
    return name.rsplit(".", 1)[-1] if name else name


@dataclass
class Signature:
    failure_class: str
    exc_type: str | None = None
    messages: list[str] = field(default_factory=list)
    # context (not part of "fails the same way": a repro reproduces on any stage/device label)
    stage: str | None = None
    device: str | None = None
    dtype: str | None = None
    # where, once minify found it: sorted op targets, the bisector's normalized answer, how found
    culprit_ops: list[str] = field(default_factory=list)
    bisect: str | None = None
    culprit_method: str | None = None
    verified: bool = False  # fresh-process runs of the minimized repro failed this way

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict | None) -> "Signature | None":
        if not isinstance(d, dict) or not d.get("failure_class"):
            return None
        return cls(str(d["failure_class"]), d.get("exc_type"), [str(m) for m in d.get("messages") or []],
                   d.get("stage"), d.get("device"), d.get("dtype"),
                   sorted(str(o) for o in d.get("culprit_ops") or []), d.get("bisect"), d.get("culprit_method"),
                   bool(d.get("verified")))

    @property
    def is_error(self) -> bool:
        return self.failure_class in ERROR_CLASSES

    @property
    def is_compiler_diagnostic(self) -> bool:
        """The messages are a compiler's ``error:`` lines (not a Python exception's first line)."""
        return any(m.startswith(("error:", "fatal error:")) for m in self.messages)

    @property
    def is_generated_code_error(self) -> bool:
        """A compiler rejected inductor's generated code: a C++ compiler's ``error:`` lines or
        Triton's CompilationError. Its words describe the generated code, which changes with the
        inputs' dtypes and layouts (``VecMask<unsigned char>`` for uint8, ``operator|`` for int8):
        one bug reached from different inputs says different things."""
        return self.failure_class == "compile_error" and (
            self.is_compiler_diagnostic or self.exc_type == "CompilationError")

    @property
    def culprit(self) -> dict | None:
        """The verified "where": None unless a verified repro named ops or a bisector answer."""
        if not self.verified or not (self.culprit_ops or self.bisect):
            return None
        return {"ops": list(self.culprit_ops), "bisect": self.bisect}

    def matches(self, other: "Signature | None") -> bool:
        """Whether ``other`` fails the same way (class, exception type, compiler messages)."""
        if other is None or other.failure_class != self.failure_class:
            return False
        if self.failure_class not in ERROR_CLASSES:
            return True
        if self.exc_type != other.exc_type:
            return False
        if self.exc_type == ABORT_TYPE and (not self.messages or not other.messages):
            return True  # an abort whose thrown type went unprinted ("terminate called recursively")
        if not self.messages or not other.messages:
            return not self.messages and not other.messages
        return bool(set(self.messages) & set(other.messages))

    def admits(self, captured: "Signature") -> bool:
        """Whether a captured graph's failure is this (the check's) failure: the class must match
        (any two error classes do: the graph may fail at compile where the program failed at run);
        the exception type too where both have one; message keys must overlap when both have them."""
        both_errors = self.failure_class in ERROR_CLASSES and captured.failure_class in ERROR_CLASSES
        if self.failure_class != captured.failure_class and not both_errors:
            return False
        if captured.failure_class not in ERROR_CLASSES or self.exc_type == EXIT_TYPE:
            return True   # an exit status names no exception: any error of the class is the program's
        if self.exc_type and captured.exc_type and self.exc_type != captured.exc_type:
            return False
        if self.messages and captured.messages:
            return bool(set(self.messages) & set(captured.messages))
        return True

    def seen_in(self, output: str) -> bool:
        """Whether a process's output shows this failure (a repro run's stderr)."""
        if self.failure_class == "accuracy":
            return "AccuracyError" in output
        if self.failure_class not in ERROR_CLASSES:
            return True
        if self.exc_type == ABORT_TYPE:
            found = signature_of_abort(output, None)
            return found is not None and self.matches(found)
        if self.exc_type and self.exc_type not in output:
            return False
        if not self.messages:
            return True
        norm = {normalize_line(line) for line in output.splitlines()}
        keys = set(message_keys(output)) | norm
        text = "\n".join(keys)
        return any(m in keys or m in text for m in self.messages)

    @staticmethod
    def reruns_alike(a: CheckRow, b: CheckRow) -> bool:
        """Two runs of one check (results.json rows) failed the same way, to the number: the same
        status and class, the same accuracy numbers (RMSE compiled and eager vs fp64, to 4
        significant digits) or the same error type (the check is deterministic)."""
        if (a.status, a.failure_class) != (b.status, b.failure_class):
            return False
        acc_a, acc_b = a.accuracy or Accuracy(), b.accuracy or Accuracy()
        for x, y in ((acc_a.rmse_res, acc_b.rmse_res), (acc_a.rmse_ref, acc_b.rmse_ref)):
            if isinstance(x, (int, float)) and isinstance(y, (int, float)):
                if f"{x:.4g}" != f"{y:.4g}":
                    return False
            elif x != y:
                return False
        return (a.error or CheckError()).type == (b.error or CheckError()).type

    def fails_run(self, rc: int | None, output: str) -> bool:
        """Whether a process that ended with ``rc`` (-signal; None: killed at its time limit) and
        printed ``output`` failed this way: a crash by a signal, anything else by a non-zero exit
        whose output shows it."""
        if rc is None:
            return False
        if self.failure_class == "crash":
            return rc < 0
        return rc != 0 and self.seen_in(output)

    def describe(self) -> str:
        if self.failure_class not in ERROR_CLASSES:
            return self.failure_class
        msg = f": {self.messages[0]}" if self.messages else ""
        return f"{self.failure_class} {self.exc_type}{msg}"


def unwrap(exc: BaseException) -> BaseException:
    """The user-meaningful exception inside dynamo's wrappers (``BackendCompilerFailed.inner_exception``):
    what a check row records as its error type."""
    seen = set()
    while id(exc) not in seen:
        seen.add(id(exc))
        inner = getattr(exc, "inner_exception", None)
        if isinstance(inner, BaseException):
            exc = inner
            continue
        break
    return exc


def exception_chain(exc: BaseException) -> list[BaseException]:
    out, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        out.append(exc)
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return out


def signature_of_exception(failure_class: str, exc: BaseException) -> Signature:
    chain = exception_chain(exc)
    chosen = next((e for e in chain if type(e).__name__ not in WRAPPERS), None)
    if chosen is None:
        # only wrappers (e.g. an InductorError whose cause was dropped by a compile pool): the real
        # type is then written as "Name: message" inside the wrapper's text
        return signature_of_error_record(failure_class, CheckError(type=type(exc).__name__, message=str(exc)))
    return Signature(failure_class, type(chosen).__name__, message_keys(str(chosen)))


def signal_name(num: int) -> str:
    """SIGSEGV for 11; the number as text for a signal this platform has no name for."""
    import signal

    try:
        return signal.Signals(num).name
    except ValueError:
        return str(num)


def is_oom_output(output: str) -> bool:
    """The output of a process that ran out of memory (Python's MemoryError, a CUDA/allocator
    "out of memory")."""
    return "MemoryError" in (output or "") or "out of memory" in (output or "").lower()


@dataclass(frozen=True)
class Death:
    """How a process that a signal killed died, decided once for check, commands and minify:

    - ``oom``: SIGKILL that was not ours (the kernel's OOM killer is the usual sender);
    - ``abort``: SIGABRT after ``terminate called ...`` - compiled code threw a C++ exception
      (``thrown``: that line), a runtime error of the generated code, not a crash;
    - ``crash``: any other signal."""

    kind: str
    signal: str
    thrown: str | None = None

    def describe(self, what: str = "process") -> str:
        if self.kind == "oom":
            return f"{what} killed by {self.signal} (out of memory?)"
        if self.kind == "abort":
            return f"compiled code threw a C++ exception ({self.thrown}); the process aborted with {self.signal}"
        return f"{what} died with {self.signal}"


def death_of(signum: int, output: str, *, compiled: bool = True) -> Death:
    """Classify a death by signal ``signum`` from the process's output. ``compiled``: whether the
    process may have run compiled code (an abort before any compile is a crash)."""
    import signal

    name = signal_name(signum)
    if signum == signal.SIGKILL:
        return Death("oom", name)
    thrown = uncaught_cpp(output) or ABORT_OUTPUT.search(output or "")
    if thrown and signum == signal.SIGABRT and compiled:
        return Death("abort", name, thrown.group(0))
    return Death("crash", name)


def uncaught_cpp(output: str | None) -> re.Match | None:
    """The ``terminate called after throwing an instance of 'T'`` line, with what other aborting
    threads wrote into the middle of it taken out; None when the threads garbled every such line
    (then the type is unknown)."""
    for m in UNCAUGHT_CPP.finditer(_INTERLEAVED.sub("", output or "")):
        thrown = m.group(0)[len("terminate called after throwing an instance of '"):-1]
        if thrown.strip() and "terminate called" not in thrown:
            return m
    return None


def signature_of_abort(output: str, signal_name: str | None = "SIGABRT") -> Signature | None:
    """The signature of a process that died because compiled code threw a C++ exception
    (``terminate called after throwing ...`` in its output, then SIGABRT); None otherwise."""
    if signal_name not in (None, "SIGABRT"):
        return None
    m = uncaught_cpp(output)
    if m is not None:
        return Signature("runtime_error", ABORT_TYPE, [normalize_line(m.group(0))])
    if ABORT_OUTPUT.search(output or ""):
        # several OpenMP threads threw at once; the process aborted before the first one's
        # "terminate called after throwing ..." line was written: same failure, type unknown
        return Signature("runtime_error", ABORT_TYPE, [])
    return None


def signature_of_error_record(failure_class: str, error: CheckError | None) -> Signature | None:
    """The signature of a check row's ``error`` (as the row, a failure record or a minify job
    carries it).

    The row's type is often a wrapper (BackendCompilerFailed); the real type is then found as
    ``Name: message`` inside the message text."""
    if error is None or not (error.type or error.message):   # no error recorded
        return None
    etype = short_type(error.type)
    message = error.message or ""
    if etype == ABORT_TYPE:
        m = uncaught_cpp(message) or uncaught_cpp(error.traceback)
        return Signature(failure_class, ABORT_TYPE, [normalize_line(m.group(0))] if m else [])
    if etype in WRAPPERS or etype is None:
        found = None
        for m in re.finditer(r"(?m)^\s*(?:[\w.]+\.)?(\w+(?:Error|Exception)): ?(.*)$", message):
            if m.group(1) not in WRAPPERS:
                found = m
                break
        if found:
            etype = found.group(1)
            message = message[found.start(2):]
    return Signature(failure_class, etype, message_keys(message))


# --------------------------------------------------------------------------- a record's signature

# Ops that only move or alias data: a minimized graph may keep them around the culprit, and which
# ones it keeps depends on the model's shapes, so they never identify a bug.
PLUMBING_OPS = frozenset({
    "aten.view.default", "aten.permute.default", "aten.t.default", "aten.clone.default",
    "aten.expand.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.alias.default",
    "aten.transpose.int", "aten.unsqueeze.default", "aten.squeeze.dim", "aten.contiguous.default",
    "aten.slice.Tensor", "aten.select.int", "aten.detach.default", "aten._to_copy.default",
})
VERIFIED_STATUSES = ("minimized", "partial")


def device_type(device) -> str:
    return str(device or "unknown").split(":")[0].strip().lower() or "unknown"


def bisect_answer(bisect: GraphBisect | str | None) -> str | None:
    """The bisector's one-line answer ("lowerings: relu"), normalized; None when it had none."""
    if isinstance(bisect, str):
        return normalize_line(bisect) or None
    if bisect is None or bisect.incomplete or not bisect.subsystem:
        return None
    detail = bisect.detail
    text = f"{bisect.subsystem}: {detail}" if detail not in (None, "") else str(bisect.subsystem)
    return normalize_line(text) or None


def bisect_words(bisect: GraphBisect | None) -> str | None:
    """One line for the bisector's answer: ``lowerings: relu``."""
    if bisect is None or bisect.incomplete or not bisect.subsystem:
        return None
    detail = str(bisect.detail or "").strip().splitlines()
    last = detail[-1] if detail else ""
    # torch's debug_info for lowerings reads "relu" or "lowering relu"; keep it short
    return f"{bisect.subsystem}: {last[:80]}" if last else str(bisect.subsystem)

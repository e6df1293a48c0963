"""Failure signatures: what "fails the same way" means while minifying and verifying.

A signature is the failure class plus, for errors, the exception type (the most specific one in
the chain, with torch's wrapper exceptions skipped) and a normalized message: compiler
diagnostics (``error:`` lines) or the first line, with paths, numbers, hashes and generated
identifiers removed. An accuracy failure's signature is just its class: a candidate that raises
does *not* fail that way (so minification cannot drift from a wrong result to a crash).

Pure Python; no torch import.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

ERROR_CLASSES = ("compile_error", "runtime_error")
MINIFIABLE_CLASSES = ("accuracy", "compile_error", "runtime_error", "crash")

# Exceptions that only wrap the real one.
WRAPPERS = {
    "BackendCompilerFailed", "InductorError", "TorchRuntimeError", "InternalTorchDynamoError",
    "CalledProcessError", "SubprocException", "UncapturedHigherOrderOpError",
}

# A C++ exception thrown by compiled code inside an OpenMP region cannot propagate: the runtime
# calls std::terminate and the process aborts. ``check`` records that as a runtime error of type
# UncaughtCppException; a minify query or a repro run that dies the same way fails the same way.
ABORT_TYPE = "UncaughtCppException"
UNCAUGHT_CPP = re.compile(r"terminate called after throwing an instance of '[^']*'")

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "`": "'"})


def normalize_line(line: str) -> str:
    s = line.translate(_QUOTES)
    s = re.sub(r"(?:[A-Za-z]:)?(?:/[^\s:'\"]+)+", "<path>", s)       # paths
    s = re.sub(r"0x[0-9a-fA-F]+", "<hex>", s)
    s = re.sub(r"\b[0-9a-f]{16,}\b", "<hash>", s)
    s = re.sub(r"\b(tmp|buf|arg|primals|tangents|getitem|x|in_ptr|out_ptr|in_out_ptr|ks|s)\d+(_\d+)?\b",
               r"\1N", s)
    s = re.sub(r"\d+(\.\d+)?", "N", s)
    s = re.sub(r"\s+", " ", s).strip()
    return s[:300]


def message_keys(message: str | None) -> list[str]:
    """The normalized lines that identify an error message."""
    if not message:
        return []
    lines = [l for l in message.splitlines() if l.strip()]
    diag = []
    for l in lines:
        m = re.search(r"\b(error|fatal error): (.*)$", l)
        if m and not l.lstrip().startswith(("Command", "Output")):
            diag.append(normalize_line(f"{m.group(1)}: {m.group(2)}"))
    if diag:
        return sorted(set(diag))
    # first line, without a leading "SomeError: " that repeats the type
    first = re.sub(r"^[\w.]+(Error|Exception|Failed): ", "", lines[0].strip()) if lines else ""
    return [normalize_line(first)] if first else []


def short_type(name: str | None) -> str | None:
    return name.rsplit(".", 1)[-1] if name else name


@dataclass
class Signature:
    failure_class: str
    exc_type: str | None = None
    messages: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict | None) -> "Signature | None":
        if not d:
            return None
        return cls(d["failure_class"], d.get("exc_type"), list(d.get("messages") or []))

    def matches(self, other: "Signature | None") -> bool:
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

    def describe(self) -> str:
        if self.failure_class not in ERROR_CLASSES:
            return self.failure_class
        msg = f": {self.messages[0]}" if self.messages else ""
        return f"{self.failure_class} {self.exc_type}{msg}"


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
        return signature_of_error_record(failure_class, {"type": type(exc).__name__, "message": str(exc)})
    return Signature(failure_class, type(chosen).__name__, message_keys(str(chosen)))


def signature_of_abort(output: str, signal_name: str | None = "SIGABRT") -> Signature | None:
    """The signature of a process that died because compiled code threw a C++ exception
    (``terminate called after throwing ...`` in its output, then SIGABRT); None otherwise."""
    if signal_name not in (None, "SIGABRT"):
        return None
    m = UNCAUGHT_CPP.search(output or "")
    if m is not None:
        return Signature("runtime_error", ABORT_TYPE, [normalize_line(m.group(0))])
    if "terminate called recursively" in (output or ""):
        # several OpenMP threads threw at once; the process aborted before the first one's
        # "terminate called after throwing ..." line was written: same failure, type unknown
        return Signature("runtime_error", ABORT_TYPE, [])
    return None


def signature_of_error_record(failure_class: str, error: dict | None) -> Signature | None:
    """The signature of a check row's ``error`` ({"type", "message", ...}).

    The row's type is often a wrapper (BackendCompilerFailed); the real type is then found as
    ``Name: message`` inside the message text."""
    if not error:
        return None
    etype = short_type(error.get("type"))
    message = error.get("message") or ""
    if etype == ABORT_TYPE:
        m = UNCAUGHT_CPP.search(message) or UNCAUGHT_CPP.search(error.get("traceback") or "")
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


def consistent(original: Signature | None, captured: Signature) -> bool:
    """Whether a captured graph's failure is the check's failure (type must match; message keys
    must overlap when both have them)."""
    if original is None:
        return True
    both_errors = original.failure_class in ERROR_CLASSES and captured.failure_class in ERROR_CLASSES
    if original.failure_class != captured.failure_class and not both_errors:
        return False
    if captured.failure_class not in ERROR_CLASSES:
        return True
    if original.exc_type and captured.exc_type and original.exc_type != captured.exc_type:
        return False
    if original.messages and captured.messages:
        return bool(set(original.messages) & set(captured.messages))
    return True


def stderr_matches(sig: Signature, stderr: str) -> bool:
    """Whether a process's stderr shows this failure (used to verify repro.py runs)."""
    if sig.failure_class == "accuracy":
        return "AccuracyError" in stderr
    if sig.failure_class not in ERROR_CLASSES:
        return True
    if sig.exc_type == ABORT_TYPE:
        found = signature_of_abort(stderr, None)
        return found is not None and sig.matches(found)
    if sig.exc_type and sig.exc_type not in stderr:
        return False
    if not sig.messages:
        return True
    norm = {normalize_line(l) for l in stderr.splitlines()}
    keys = set(message_keys(stderr)) | norm
    text = "\n".join(keys)
    return any(m in keys or m in text for m in sig.messages)

"""Classify a finished program run (a benchmark command or PyTorch's harness) from its exit
status, its output and (for the harness) its CSV status word. One function for both sources.

Order of the rules (first match wins):
  over the time limit                      -> timeout
  exit 0                                   -> pass
  killed by SIGKILL                        -> oom
  SIGABRT after "terminate called ..."     -> runtime_error (compiled code threw a C++ exception)
  killed by another signal                 -> crash
  a user --error-pattern matches           -> runtime_error, or compile_error when a compiler
                                              exception is in the output too
  a user --accuracy-pattern matches        -> accuracy
  a compiler exception in the output       -> compile_error (BackendCompilerFailed, InductorError, ...)
  mismatch / accuracy wording              -> accuracy ("Tensor-likes are not close", AssertionError
                                              from an allclose check, "accuracy mismatch", ...)
  a setup failure and nothing compiled     -> setup_error (missing package, offline download)
  any other non-zero exit                  -> runtime_error

A program that never ran (:func:`never_ran`: a missing file or program, a syntax error, an import
error, or an exception raised by its own code before anything was compiled) is a setup_error whose
``classified_by`` starts with ``never ran:``; `check` exits 2 for it (an input error, not a failure).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bot.records import CheckError, CheckRow
from bot.signature import ABORT_TYPE, EXIT_TYPE, death_of

ACCURACY = re.compile(
    r"AccuracyError|fail_accuracy|Accuracy failed|Bad accuracy detected|Tensor-likes are not close|"
    r"Scalars are not close|Tensor-likes are not equal|accuracy mismatch|"
    r"(?<!size )(?<!shape )(?<!dtype )(?<!type )(?<!device )\bmismatch(?:ed|es)?\b|\bnot close\b|"
    r"outputs? (?:differ|do not match|don't match)|"
    r"\bdiffers? from (?:the )?(?:eager|reference|expected|baseline)\b", re.IGNORECASE)
ALLCLOSE = re.compile(r"\ballclose\b|\bisclose\b|\bassert_close\b")
COMPILE = re.compile(r"BackendCompilerFailed|InductorError|CppCompileError|LoweringException|"
                     r"torch\._dynamo\.exc\.Unsupported|CompilationError|TritonError|"
                     r"torch\._inductor\.exc\.\w+")
SETUP = re.compile(r"We couldn't connect to|can't open file .*\[Errno 2\]|command not found|"
                   r"ModuleNotFoundError|No module named|ImportError|"
                   r"LocalEntryNotFoundError|OfflineModeIsEnabled|outgoing traffic has been disabled|"
                   r"Cannot find the requested files in the (?:disk )?cache|Connection ?(?:Error|refused)|"
                   r"Failed to establish a new connection|Name or service not known|HTTPError|"
                   r"Repository Not Found|is not a local folder and is not a valid model identifier")
EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Failed|Interrupt|Exit)\w*)(?:: ?(.*))?$")
# the line that ends a Python traceback names the exception whatever it is called
# (torch._dynamo.exc.Unsupported): ``module.Type: message`` or ``Type``
RAISED_LINE = re.compile(r"^([A-Za-z_][\w.]*)(?:: ?(.*))?$")
TRACEBACK = "Traceback (most recent call last):"
DIRECT_CAUSE = "The above exception was the direct cause of the following exception:"
# pytest writes a failing test's exception as ``E       AssertionError: Tensor-likes are not close!``
PYTEST_E = re.compile(r"^E {3,}")
DIAG = re.compile(r"\b(?:error|fatal error): ")
# a program that never ran: Python's own words for a missing script, a shell's for a missing program
MISSING_FILE = re.compile(r"can't open file .*\[Errno 2\]")
MISSING_PROGRAM = re.compile(r"command not found|No such file or directory")
# a traceback frame in torch's compiler stack: an error there is the compiler's, even before dynamo
# started a frame (an import regression in inductor, an ahead-of-time compile)
COMPILER_FRAME = re.compile(r'^\s*File ".*[/\\]torch[/\\](?:_dynamo|_inductor|_functorch|_export|export|fx|'
                            r'_higher_order_ops|_subclasses|compiler|_prims|_decomp|_refs)[/\\.]', re.MULTILINE)
SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")
IMPORT_ERRORS = ("ModuleNotFoundError", "ImportError")
NEVER_RAN = "never ran: "



@dataclass
class Patterns:
    """User-supplied regexes (``--accuracy-pattern`` / ``--error-pattern``), checked before ours."""

    accuracy: list[str] = field(default_factory=list)
    error: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"accuracy": list(self.accuracy), "error": list(self.error)}

    @classmethod
    def from_dict(cls, d: dict | None) -> "Patterns":
        d = d or {}
        return cls(list(d.get("accuracy") or []), list(d.get("error") or []))

    def validate(self) -> "Patterns":
        from bot.errors import UsageError

        for kind, pats in (("--accuracy-pattern", self.accuracy), ("--error-pattern", self.error)):
            for p in pats:
                try:
                    re.compile(p)
                except re.error as exc:
                    raise UsageError(f"{kind} {p!r} is not a valid regular expression: {exc}") from None
        return self

    def search(self, which: str, text: str) -> str | None:
        for p in getattr(self, which):
            m = re.search(p, text, re.MULTILINE)
            if m:
                return m.group(0)
        return None


def last_exception(text: str) -> tuple[str, str] | None:
    """(short type, message) of the last ``Type: message`` line; the message gains the compiler
    diagnostics (``error: ...`` lines) printed after it, which identify a compile error."""
    lines = text.splitlines()
    raised = _raised_at(lines)
    for i in range(len(lines) - 1, -1, -1):
        line = lines[i] if i == raised else PYTEST_E.sub("", lines[i]).strip()
        m = EXC_LINE.match(line) or (RAISED_LINE.match(line) if i == raised else None)
        if m:
            if i == raised:
                i, m = _wrapped(lines, i, m)
            msg = m.group(2) or ""
            diags = [ln.strip() for ln in lines[i + 1:] if DIAG.search(ln)][:20]
            if diags:
                msg = "\n".join([msg, *diags])
            return m.group(1).rsplit(".", 1)[-1], msg[:4000]
    return None


def _wrapped(lines: list[str], i: int, m: re.Match) -> tuple[int, re.Match]:
    """The exception a program's own exception wraps: ``raise BenchmarkError("compile failed") from
    exc`` prints the compiler's exception first, then "The above exception was the direct cause of
    the following exception:" and the program's. The failure is the one it wraps (what a captured
    graph raises), through any number of such wrappers; torch's own exceptions (``torch.``) and one
    raised while handling another (not a direct cause) are the failure as they are."""
    while not m.group(1).startswith("torch."):
        header = next((j for j in range(i - 1, -1, -1) if lines[j].startswith(TRACEBACK)), None)
        sep = next((j for j in range(header - 1, -1, -1) if lines[j].strip()), None) if header else None
        if sep is None or lines[sep].strip() != DIRECT_CAUSE:
            break
        start = next((j for j in range(sep - 1, -1, -1) if lines[j].startswith(TRACEBACK)), None)
        cause = _raised_at(lines[:sep], start) if start is not None else None
        if cause is None:
            break
        i, m = cause, EXC_LINE.match(lines[cause]) or RAISED_LINE.match(lines[cause])
    return i, m


def _raised_at(lines: list[str], start: int | None = None) -> int | None:
    """The index of the line that ends the last Python traceback (or the one from ``start``): the
    first line after its frames that is not indented and names an exception."""
    if start is None:
        start = next((i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith(TRACEBACK)), None)
        if start is None:
            return None
    for i in range(start + 1, len(lines)):
        if lines[i].startswith((" ", "\t")) or not lines[i].strip():
            continue
        if EXC_LINE.match(lines[i]) or _exception_name(lines[i]):
            return i
        # another line (a log line written meanwhile): the exception's comes after it
    return None


def _exception_name(line: str) -> bool:
    """A line shaped like ``module.Name: message`` whose name is an exception class's (CamelCase:
    ``Unsupported``, not ``WARNING`` or ``step``)."""
    m = RAISED_LINE.match(line)
    name = m.group(1).rsplit(".", 1)[-1] if m else ""
    return bool(name) and name[0].isupper() and any(ch.islower() for ch in name)


def python_traceback(text: str, limit: int = 60) -> str | None:
    """The last Python traceback in the output, from "Traceback (most recent call last):" to its
    exception line, without what the exception's message printed after it (a C++ compile error's
    compiler command and warnings: its diagnostics are in the error message). None without one."""
    lines = text.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith(TRACEBACK)]
    if not starts:
        return None
    block = lines[starts[-1]:]
    end = _raised_at(block, 0)
    if end is None:
        return None
    frames = block[1:end]
    if len(frames) > limit:
        frames = ["  ..."] + frames[-limit:]
    return "\n".join([block[0], *frames, block[end]])


def never_ran(returncode: int | None, output: str, compiled_graphs: int | None) -> str | None:
    """Why a program's failing run never reached the compiler, or None: ``missing file`` (Python
    could not open the script), ``missing program`` (the shell found no such command),
    ``syntax error``, ``import error``, or ``failed before anything was compiled`` (the environment
    hook saw the program start and compile nothing, and it raised an exception: its own, or an eager
    torch op's). A run that compiled a frame, or whose exception passed through torch's compiler
    stack (an import regression inside inductor, an ahead-of-time compile), is never one."""
    if returncode is None or returncode <= 0 or (compiled_graphs or 0) > 0:
        return None
    if MISSING_FILE.search(output):
        return "missing file"
    if returncode in (126, 127) and MISSING_PROGRAM.search(output):
        return "missing program"
    exc = last_exception(output)
    if exc is None or COMPILER_FRAME.search(python_traceback(output) or "\n".join(output.splitlines()[-40:])):
        return None
    if exc[0] in SYNTAX_ERRORS:
        return "syntax error"
    if exc[0] in IMPORT_ERRORS:
        return "import error"
    if compiled_graphs == 0 and python_traceback(output):
        return "failed before anything was compiled"
    return None


def is_never_ran(row: CheckRow) -> bool:
    """A check row whose program never ran (:func:`never_ran`; `check` exits 2 for it)."""
    return bool(row.classified_by and row.classified_by.startswith(NEVER_RAN))


def _row(status, cls, etype, message, tail, signal: str | None = None) -> CheckRow:
    return CheckRow(status=status, failure_class=cls,
                    error=CheckError(type=etype, message=message, traceback=tail, frames=[], signal=signal))


def classify(*, returncode: int | None, output: str, timed_out: bool = False, timeout: float | None = None,
             status_word: str | None = None, patterns: Patterns | None = None,
             compiled_graphs: int | None = None, what: str = "command", judge_start: bool = True) -> CheckRow:
    """A results.json row's result: status, failure_class, error, accuracy (+ ``classified_by``).

    ``status_word``: the harness's CSV status for this model, when it wrote one.
    ``compiled_graphs``: frames dynamo started compiling in the run (None: unknown).
    ``judge_start``: whether a run that never reached the compiler is told apart (:func:`never_ran`);
    off for minify's reruns with the backend forced (torch.compile taken out compiles nothing)."""
    patterns = patterns or Patterns()
    tail = "\n".join(output.splitlines()[-40:])
    exc = last_exception(output)
    etype, emsg = exc if exc else (EXIT_TYPE, f"{what} exited with code {returncode}")

    def out(row: CheckRow, why: str) -> CheckRow:
        row.classified_by = why
        if returncode is not None and returncode > 0:
            row.exit_code = returncode
        return row

    if timed_out:
        return out(_row("timeout", "timeout", "Timeout", f"{what} did not finish within {timeout or 0:g} s", tail),
                   "timeout")
    if status_word and status_word.startswith("pass") and returncode in (0, None):
        return out(CheckRow(status=status_word), "harness csv")
    if returncode == 0 and not status_word:
        return out(CheckRow(status="pass"), "exit status")
    if returncode is not None and returncode < 0:
        death = death_of(-returncode, output, compiled=compiled_graphs is None or compiled_graphs > 0)
        if death.kind == "oom":
            return out(_row("OOM", "oom", "Killed", death.describe(what), tail, signal=death.signal), "signal")
        if death.kind == "abort":
            return out(_row("fail_to_run", "runtime_error", ABORT_TYPE, death.describe(what), tail,
                            signal=death.signal), "signal")
        return out(_row("fail_to_run", "crash", death.signal, death.describe(what), tail, signal=death.signal),
                   "signal")

    why = never_ran(returncode, output, compiled_graphs) if judge_start and not status_word else None
    if why:
        if not exc:   # the shell's or Python's own line says what was missing
            m = MISSING_FILE.search(output) or MISSING_PROGRAM.search(output)
            line = next((ln for ln in output.splitlines() if m and m.group(0) in ln), "")
            etype, emsg = "BadCommand", line.strip()[:500] or emsg
        return out(_row("model_fail_to_load", "setup_error", etype, emsg, tail), NEVER_RAN + why)

    user_err = patterns.search("error", output)
    if user_err:
        cls = "compile_error" if COMPILE.search(output) else "runtime_error"
        return out(_row("fail_to_run", cls, etype, emsg, tail), f"--error-pattern matched {user_err[:80]!r}")
    user_acc = patterns.search("accuracy", output)
    if user_acc:
        row = _row("fail_accuracy", "accuracy", etype, emsg, tail)
        return out(row, f"--accuracy-pattern matched {user_acc[:80]!r}")

    if status_word == "fail_accuracy" or status_word == "not_bitwise_equivalent":
        return out(_row(status_word, "accuracy", etype if exc else status_word, emsg if exc else status_word, tail),
                   "harness csv")
    m = COMPILE.search(output)
    if m:
        return out(_row(status_word or "fail_to_run", "compile_error", etype, emsg, python_traceback(output) or tail),
                   f"output: {m.group(0)}")
    m = ACCURACY.search(output) or (ALLCLOSE.search(output) if etype == "AssertionError" else None)
    if m and (status_word in (None, "fail_to_run")):
        return out(_row("fail_accuracy", "accuracy", etype, emsg, tail), f"output: {m.group(0)}")
    m = SETUP.search(output)
    if m and not compiled_graphs:
        return out(_row(status_word if status_word and status_word != "fail_to_run" else "model_fail_to_load",
                        "setup_error", etype, emsg, tail), f"output: {m.group(0)}")
    if status_word and not status_word.startswith("pass"):
        from bot.rundir import STATUS_CLASS

        cls = STATUS_CLASS.get(status_word, "runtime_error")
        return out(_row(status_word, cls, etype if exc else status_word, emsg if exc else status_word, tail),
                   "harness csv")
    return out(_row("fail_to_run", "runtime_error", etype, emsg, tail), "exit status")

"""The trace step: once a failure's repro is verified, run it once more, in a fresh process in a
temporary directory with a timeout, with torch's structured trace on (``TORCH_TRACE``) and the
compiled-graph caches off, so that inductor generates its code again. What PyTorch's bug template
asks for when a repro is not enough:

- ``failures/<id>/trace/``: the raw trace (gzip-compressed when large, cut at :data:`MAX_TRACE_BYTES`);
- ``failures/<id>/tlparse.zip``: tlparse's HTML report of it, when the ``tlparse`` program is
  installed (the ``trace`` extra); else the raw trace alone, and the record says so;
- ``failures/<id>/output_code.py``: the modules inductor generated (the C++ or Triton kernels and
  their wrapper), from the trace, cut at :data:`MAX_OUTPUT_CODE_CHARS`.

The record is failure.json's ``trace`` (:class:`bot.records.Trace`). Nothing here fails the failure:
a rerun that does not finish, writes no trace or no code, leaves a record with a ``note``.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys
import tempfile
import time
import zipfile
from typing import Callable

from bot import extra_hint, proc, rundir
from bot.failure import FailureRecord
from bot.minify import procs
from bot.minify.worker import child
from bot.records import Repro, Trace
from bot.torch_adapter import trace as ttrace

TRACE_TIMEOUT = 300.0
TLPARSE_TIMEOUT = 120.0
MAX_TRACE_BYTES = 5 * 1024 * 1024            # the trace kept in the run directory
PLAIN_TRACE_BYTES = 1024 * 1024              # larger trace files are kept gzip-compressed
MAX_OUTPUT_CODE_CHARS = 100_000
MAX_TLPARSE_BYTES = 20 * 1024 * 1024         # tlparse's report, zipped


def trace_verified(rec: FailureRecord, fdir: str, say: Callable[[str], None], timeout: float = TRACE_TIMEOUT,
                   interps: procs.Interpreters | None = None) -> None:
    """The trace step of a failure whose repro was verified (else nothing): ``rec.trace``. The
    traced run is a fork of ``interps``' server when there is one (torch imported and warmed
    once), else a fresh interpreter."""
    if not rec.repro_verified:
        return
    t = time.time()
    try:
        rec.trace = trace_repro(fdir, rec.repro, timeout, interps)
    except Exception as exc:  # noqa: BLE001 - the trace is extra: it never costs the verified repro
        rec.trace = Trace(repro=repro_file(fdir, rec.repro), note=f"the trace step failed: {type(exc).__name__}: "
                          f"{str(exc)[:500]}")
    rec.trace.seconds = round(time.time() - t, 2)
    rec.repro.add_time("trace", rec.trace.seconds)
    say(f"trace: {describe(rec.trace)}")


def describe(tr: Trace) -> str:
    kept = (f"{tr.trace_dir}/ ({tr.trace_bytes} bytes{', cut' if tr.trace_cut else ''})" if tr.trace_dir
            else "no trace")
    parts = [f"{tr.repro} traced: {kept}", tr.tlparse or "no tlparse report",
             f"{tr.output_code} ({tr.output_code_modules} modules)" if tr.output_code else "no generated code"]
    return "; ".join(parts) + (f" ({tr.note})" if tr.note else "")


def repro_file(fdir: str, repro: Repro) -> str:
    """The repro the trace runs: the plain repro when it reproduced, else repro.py."""
    plain = repro.plain
    if plain is not None and plain.reproduces and os.path.isfile(os.path.join(fdir, plain.path)):
        return plain.path
    return repro.path or rundir.REPRO


def trace_repro(fdir: str, repro: Repro, timeout: float = TRACE_TIMEOUT,
                interps: procs.Interpreters | None = None) -> Trace:
    """Run the failure's repro once with the trace on; keep the trace, its tlparse report and the
    generated code in ``fdir``."""
    rel = repro_file(fdir, repro)
    tr = Trace(repro=rel)
    notes: list[str] = []
    tmp = tempfile.mkdtemp(prefix="minify-trace-")
    try:
        tdir = os.path.join(tmp, "trace")
        res = _traced_run(os.path.abspath(os.path.join(fdir, rel)), tdir, os.path.join(tmp, "cwd"),
                          os.path.join(fdir, rundir.MINIFIER_LOG), timeout, interps)
        tr.exit_code = None if res.timed_out else res.returncode
        if res.timed_out:
            notes.append(f"the traced run timed out after {timeout:.0f} s")
        elif res.error:
            notes.append(res.error)
        files = ttrace.trace_files(tdir)
        if not files:
            notes.append("the traced run wrote no trace")
        else:
            _keep_trace(files, fdir, tr, notes)
            _keep_output_code(files, fdir, tr, notes)
            _tlparse(files, fdir, tmp, tr, notes)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    tr.note = "; ".join(notes)[:4000] or None
    return tr


def _traced_run(script: str, tdir: str, cwd: str, log_path: str, timeout: float,
                interps: procs.Interpreters | None) -> proc.Result:
    """One run of ``script`` traced into ``tdir``: forked from the server when it can turn the trace
    on there, else in a fresh interpreter (where the environment does it)."""
    os.makedirs(cwd, exist_ok=True)
    name = os.path.basename(script)
    if interps is not None:
        runner, *args = ttrace.traced_command(tdir, script)
        res = interps.run_script(runner, args, timeout=timeout, cwd=cwd, log_path=log_path,
                                 announce=f"$ (traced, forked from the fork server) python {name}")
        if res is not None and not ttrace.cannot_trace_here(res.returncode):
            return res
        shutil.rmtree(tdir, ignore_errors=True)
    return proc.run([child.python(), *ttrace.traced_command(tdir, script)], cwd=cwd,
                    env=procs.repro_env(), timeout=timeout, log_path=log_path,
                    announce=f"$ (traced) python {name}")


def _keep_trace(files: list[str], fdir: str, tr: Trace, notes: list[str]) -> None:
    """Copy the trace files into ``fdir/trace`` (large ones gzip-compressed), at most MAX_TRACE_BYTES."""
    dest = os.path.join(fdir, rundir.TRACE_DIR)
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    total = 0
    for i, src in enumerate(files):
        name = os.path.basename(src)
        if not rundir.SAFE_NAME.fullmatch(name + ".gz"):
            name = f"trace_{i}.log"
        room = MAX_TRACE_BYTES - total
        size = os.path.getsize(src)
        if room <= 64 * 1024:
            tr.trace_cut = True
            break
        if size <= min(PLAIN_TRACE_BYTES, room):
            shutil.copyfile(src, os.path.join(dest, name))
            total += size
            continue
        written, whole = _gzip_capped(src, os.path.join(dest, name + ".gz"), room)
        total += written
        tr.trace_cut = tr.trace_cut or not whole
    tr.trace_dir, tr.trace_bytes = rundir.TRACE_DIR, total
    if tr.trace_cut:
        notes.append(f"the trace was cut at {MAX_TRACE_BYTES // (1024 * 1024)} MB (compressed)")


def _gzip_capped(src: str, dst: str, budget: int) -> tuple[int, bool]:
    """gzip ``src`` into ``dst``, stopping at a line once the output nears ``budget`` bytes:
    (bytes written, whether all of it was)."""
    whole = True
    with open(src, "rb") as fin, open(dst, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
            for line in fin:
                gz.write(line)
                if raw.tell() > budget - 64 * 1024:
                    whole = False
                    break
        size = raw.tell()
    return size, whole


def _keep_output_code(files: list[str], fdir: str, tr: Trace, notes: list[str]) -> None:
    """The modules inductor generated, from the trace, into ``fdir/output_code.py`` (bounded)."""
    mods: list[ttrace.OutputCode] = []
    for path in files:
        with open(path, encoding="utf-8", errors="replace") as fh:
            mods += ttrace.output_code(fh, MAX_OUTPUT_CODE_CHARS)
    mods = [m for m in mods if m.source.strip()]
    if not mods:
        notes.append("the trace carries no generated code (inductor wrote no module)")
        return
    if len(mods) == 1:
        text = mods[0].source
    else:
        text = "\n".join(f"# ---- inductor output code {k} of {len(mods)}: graph {m.compile_id} ----\n{m.source}"
                         for k, m in enumerate(mods, 1))
    tr.output_code_chars, tr.output_code_modules = len(text), len(mods)
    if len(text) > MAX_OUTPUT_CODE_CHARS:
        kept = text[:MAX_OUTPUT_CODE_CHARS].rsplit("\n", 1)[0]
        text = f"{kept}\n# [... cut: {len(text) - len(kept)} more characters; the whole code is in the trace ...]\n"
        notes.append(f"output_code.py was cut at {MAX_OUTPUT_CODE_CHARS} characters")
    with open(os.path.join(fdir, rundir.OUTPUT_CODE), "w", encoding="utf-8") as fh:
        fh.write(text)
    tr.output_code = rundir.OUTPUT_CODE


def tlparse_program() -> str | None:
    """The tlparse program: beside this Python (a virtual environment's bin/), else on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "tlparse")
    return here if os.access(here, os.X_OK) else shutil.which("tlparse")


def _tlparse(files: list[str], fdir: str, tmp: str, tr: Trace, notes: list[str]) -> None:
    """tlparse's HTML report of the (first) trace file, zipped into ``fdir/tlparse.zip``."""
    exe = tlparse_program()
    if exe is None:
        notes.append(f"tlparse is not installed ({extra_hint('trace')}): the raw trace only")
        return
    out = os.path.join(tmp, "tl_out")
    res = proc.run([exe, files[0], "-o", out, "--overwrite", "--no-browser"], cwd=tmp, timeout=TLPARSE_TIMEOUT,
                   log_path=os.path.join(fdir, rundir.MINIFIER_LOG), announce="$ tlparse <trace> -o tl_out")
    if not res.ok or not os.path.isfile(os.path.join(out, "index.html")):
        why = "timed out" if res.timed_out else res.error or f"exit {res.returncode}"
        notes.append(f"tlparse failed ({why}): the raw trace only")
        return
    dest = os.path.join(fdir, rundir.TLPARSE_REPORT)
    _zip_dir(out, dest)
    if os.path.getsize(dest) > MAX_TLPARSE_BYTES:
        os.remove(dest)
        notes.append(f"tlparse's report is over {MAX_TLPARSE_BYTES // (1024 * 1024)} MB zipped: not kept")
        return
    tr.tlparse = rundir.TLPARSE_REPORT


def _zip_dir(src: str, dest: str) -> None:
    """Zip the regular files under ``src`` (no links) into ``dest``, paths relative to ``src``."""
    with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for dirpath, dirnames, filenames in os.walk(src, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                if os.path.isfile(path) and not os.path.islink(path):
                    zf.write(path, os.path.relpath(path, src))

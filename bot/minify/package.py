"""Package a repro for publishing: relative input paths, no machine-specific env lines or cache
directories, only the config that matters, only the storages it reads; plus a standalone
variant (random inputs, no files) when random inputs reproduce.

Pure text processing of torch's repro format (see bot.torch_adapter.repro for the patterns).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile

from bot import rundir
from bot.records import ConfigEntry, ConfigSetting
from bot.torch_adapter.config import CONFIG_LINE, MODULES, config_line
from bot.torch_adapter.repro import ENV_LINE, SAVE_DIR_ARG, STORAGE_LINE

INPUTS_LINE = "_INPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'inputs')"
HEADER = "# Minimized by minify-bot. Run: python {name}   (inputs: {inputs})\n"
_ABS = re.compile(r"""(['"])(/(?:[^'"\s]+/)+[^'"\s]*)\1""")
# torch's after_aot files register their source with linecache when exec'd from a string; a
# repro run as a file never is: 9 lines a maintainer would only have to read past
_COMPILE_SOURCE_BLOCK = re.compile(r'\nif "__compile_source__" in globals\(\):\n(?:[ \t]+\S.*\n)+')
_MACHINE_DIRS = r"/home/|/tmp/|/root/|/Users/|[A-Za-z]:\\"   # the usual home and temporary directories


def machine_comment(dirs: list[str]) -> re.Pattern:
    """A comment naming a home or temporary directory: the usual ones and ``dirs`` (this machine's
    own, wherever they are; a directory that is the file system's root is no sign of a machine)."""
    own = sorted({os.path.join(p, "") for d in dirs for p in (d, os.path.realpath(d)) if p.strip(os.sep)})
    return re.compile(r"^#.*(" + "|".join([_MACHINE_DIRS, *map(re.escape, own)]) + ")")


_MACHINE_COMMENT = machine_comment([os.path.expanduser("~"), tempfile.gettempdir()])


def clean_source(source: str, config: list[ConfigEntry] | None, *, standalone: bool, name: str,
                 judge: list[ConfigSetting] | None = None) -> str:
    """Rewrite a torch-format repro. ``config``: [{key, value}] to set (None: keep the file's);
    ``judge``: [{key, value}] that say how the repro judges its result (written after the config,
    so they hold either way)."""
    repl = "save_dir=None" if standalone else "save_dir=_INPUTS"
    lines = SAVE_DIR_ARG.sub(repl, source).splitlines()
    out: list[str] = []
    for line in lines:
        s = line.strip()
        if ENV_LINE.match(s):
            continue  # machine-specific: cache dirs, debug dirs, internal pointers
        if config is not None and CONFIG_LINE.match(s):
            continue  # replaced by the config the failure needs
        if _MACHINE_COMMENT.match(s):
            continue
        out.append(line)
    text = _drop_blank_runs(_COMPILE_SOURCE_BLOCK.sub("\n", "\n".join(out) + "\n"))
    extra = "".join(config_line(d.key, d.value) + "\n" for d in (config or []))
    if judge:
        extra += "# judged like the check: " + ", ".join(f"{d.key.partition('.')[2]}={d.value!r}"
                                                         for d in judge) + "\n"
        extra += "".join(config_line(d.key, d.value) + "\n" for d in judge)
    if extra:
        anchor = f"import {MODULES['fx']}\n"   # the last config import of a torch-format repro
        if anchor in text and config is not None:
            text = text.replace(anchor, anchor + extra, 1)
        else:  # after the file's own config lines (they are kept), before the graph
            marker = "\nclass Repro("
            i = text.find("\nfrom torch.nn import *") if "\nfrom torch.nn import *" in text else text.find(marker)
            text = text[:i + 1] + extra + text[i + 1:] if i >= 0 else extra + text
    if not standalone:
        marker = "mod = Repro()\n"
        text = text.replace(marker, INPUTS_LINE + "\n" + marker, 1)
    if not re.search(r"(?m)^import os$", text):
        text = "import os\n" + text
    text = HEADER.format(name=name, inputs="random" if standalone else "./inputs") + text
    # no absolute paths may survive (they are machine-specific)
    text = _ABS.sub(lambda m: m.group(1) + os.path.basename(m.group(2)) + m.group(1), text)
    return text


def _drop_blank_runs(text: str) -> str:
    """At most one blank line in a row (removed config and env lines leave runs of them)."""
    return re.sub(r"\n{3,}", "\n\n", text)


def copy_inputs(source: str, save_dir: str | None, dest_dir: str) -> tuple[int, int]:
    """Copy the storages the repro reads; returns (copied, missing)."""
    hashes = [m.group(2) for m in STORAGE_LINE.finditer(source)]
    os.makedirs(os.path.join(dest_dir, "storages"), exist_ok=True)
    copied = missing = 0
    for h in dict.fromkeys(hashes):
        src = os.path.join(save_dir, "storages", h) if save_dir else None
        if src and os.path.exists(src):
            shutil.copyfile(src, os.path.join(dest_dir, "storages", h))
            copied += 1
        else:
            missing += 1
    return copied, missing


def write_repro(final_path: str, save_dir: str | None, out_dir: str, config: list[ConfigEntry] | None,
                judge: list[ConfigSetting] | None = None) -> str:
    with open(final_path, encoding="utf-8") as fh:
        source = fh.read()
    copy_inputs(source, save_dir, os.path.join(out_dir, rundir.INPUTS_DIR))
    path = os.path.join(out_dir, rundir.REPRO)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(clean_source(source, config, standalone=False, name=rundir.REPRO, judge=judge))
    return path


def write_standalone(out_dir: str, config: list[ConfigEntry] | None, final_path: str,
                     judge: list[ConfigSetting] | None = None) -> str:
    with open(final_path, encoding="utf-8") as fh:
        source = fh.read()
    path = os.path.join(out_dir, rundir.STANDALONE)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(clean_source(source, config, standalone=True, name=rundir.STANDALONE, judge=judge))
    return path

"""What GitHub shows is public: the runner's paths taken out of every text the bot publishes.

One function, :func:`public_text`, applied where text leaves for GitHub (``bot.render.Renderer.render``:
every issue title and body, comment, summary, dashboard and upstream report is a template's output),
so nothing can bypass it. It rewrites:

- a library's directory (any ``…/site-packages/`` or ``…/dist-packages/``) as ``<site-packages>/``;
- inductor's cache (``…/torchinductor_<user>``, ``$TORCHINDUCTOR_CACHE_DIR``) as ``<inductor-cache>``;
- the workspace (``$GITHUB_WORKSPACE``, this process's working directory, the checkout the bot runs
  from when it is not an installed package, and an Actions runner's checkout layout, ``<repo>/<repo>``
  under its ``_work`` or ``work`` directory, whichever runner wrote the text) away, so
  a file in it reads as a path relative to the workspace;
- the venv (``$VIRTUAL_ENV``, ``sys.prefix``) as ``<venv>``, the interpreter's own library and its
  installation (``sys.base_prefix``: headers and libraries a compiler command names) as ``<python>``;
- temporary directories (``$RUNNER_TEMP``, ``$TMPDIR``, the runner's ``_work/_temp``, ``/tmp``,
  ``/var/tmp``) as ``<tmp>``;
- home directories (``$HOME``, ``/home/<user>``, ``/Users/<user>``, ``/root``) as ``~``.

A path counts wherever it starts: after a space or a quote, and after a compiler's option letter
(``-I/opt/python/include/python3.11``) or an ``=``.

:func:`without_bot_frames` takes this bot's own frames (its environment hook's ``wrapper``, its
runners) out of a traceback, so a traceback starts where the program's and torch's code does.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import sysconfig
import tempfile
from collections.abc import Mapping

# characters a path may hold (a path in a log ends at whitespace, a quote, a bracket or a colon)
_P = r"[^\s'\"`()<>\[\]{},:;|]"
_END = rf"(?!{_P})"
# where a path starts: after a character no path holds, a compiler's option letter (``-I/usr/...``,
# ``-L/opt/python/lib``) or an ``=`` (``--prefix=/opt/...``)
_START = rf"(?:(?<!{_P})|(?<=(?<!{_P})-[A-Za-z])|(?<==))"

# libraries and caches first (wherever they are), then this machine's own roots, then runners' layouts
_FIRST: list[tuple[tuple[str, ...], re.Pattern, str]] = [   # (words one of which the text must hold, pattern, word)
    (("-packages",), re.compile(rf"(?:/{_P}+?)?/(?:site|dist)-packages(?=/|{_END})"), "<site-packages>"),
    (("torchinductor_",), re.compile(rf"(?:/{_P}+?)?/torchinductor_[^\s/'\"`]+"), "<inductor-cache>"),
]
_LAST: list[tuple[tuple[str, ...], re.Pattern, str]] = [
    # an Actions runner's workspace, whichever machine wrote the text: <root>/_work/<repo>/<repo>
    (("work/",), re.compile(rf"(?:/{_P}+?)?/_?work/([A-Za-z0-9_.-]+)/\1(?:/|{_END})"), ""),
    (("work/_temp",), re.compile(rf"(?:/{_P}+?)?/_?work/_temp(?=/|{_END})"), "<tmp>"),
    (("tmp",), re.compile(rf"{_START}/(?:private/)?(?:var/)?tmp(?=/|{_END})"), "<tmp>"),
    (("/home/", "/Users/"), re.compile(rf"{_START}/(?:home|Users)/[^\s/'\"`]+"), "~"),
    (("/root",), re.compile(rf"{_START}/root(?=/|{_END})"), "~"),
]


_ENV_KEYS = ("TORCHINDUCTOR_CACHE_DIR", "VIRTUAL_ENV", "RUNNER_TEMP", "TMPDIR", "GITHUB_WORKSPACE", "HOME")


def _roots(env: Mapping[str, str]) -> list[tuple[tuple[str, ...], re.Pattern, str]]:
    """This machine's own directories (as patterns) and what each reads as, longest first; computed
    once per environment and working directory."""
    try:
        cwd = os.getcwd()
    except OSError:
        cwd = ""
    return _roots_for(tuple(env.get(k) or "" for k in _ENV_KEYS), cwd)


@functools.lru_cache(maxsize=8)
def _roots_for(values: tuple[str, ...], cwd: str) -> list[tuple[tuple[str, ...], re.Pattern, str]]:
    env = dict(zip(_ENV_KEYS, values))
    pairs: list[tuple[str, str]] = []

    def add(path: str | None, word: str) -> None:
        if path and os.path.isabs(path) and len(path.rstrip("/")) > 1:
            pairs.append((path.rstrip("/"), word))

    add(env.get("TORCHINDUCTOR_CACHE_DIR"), "<inductor-cache>")
    add(env.get("VIRTUAL_ENV"), "<venv>")
    add(sys.prefix, "<venv>")
    add(sysconfig.get_paths().get("stdlib"), "<python>")
    if sys.base_prefix not in ("/usr", "/usr/local"):   # a system prefix is no machine's own
        add(sys.base_prefix, "<python>")   # the interpreter's installation: its headers and libraries (-I, -L)
    add(env.get("RUNNER_TEMP"), "<tmp>")
    add(env.get("TMPDIR"), "<tmp>")
    add(tempfile.gettempdir(), "<tmp>")
    add(env.get("GITHUB_WORKSPACE"), "")
    add(cwd, "")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if not re.search(r"/(?:site|dist)-packages(?:/|$)", here):   # the bot run from its own checkout
        add(here, "")
    add(env.get("HOME"), "~")
    add(os.path.expanduser("~"), "~")
    for path, word in list(pairs):   # the same directory through its links
        real = os.path.realpath(path)
        if real != path:
            add(real, word)
    ordered = sorted(dict(pairs).items(), key=lambda kv: len(kv[0]), reverse=True)
    return [((root,), re.compile(rf"{_START}{re.escape(root)}(/|{_END})"), word) for root, word in ordered]


def public_text(text: str, env: Mapping[str, str] | None = None) -> str:
    """``text`` with no path of this machine or a runner's (workspace, home, venv, temp, libraries,
    caches) left in it; a file in the workspace reads as its path relative to the workspace."""
    if not text or "/" not in text:   # no path without a slash
        return text
    env = os.environ if env is None else env
    for words, rx, word in [*_FIRST, *_roots(env), *_LAST]:
        if any(w in text for w in words):
            text = rx.sub(lambda m, w=word: _as(w, m.group(0)), text)
    return text


def _as(word: str, found: str) -> str:
    """What a matched root reads as: ``word`` (keeping the slash after it), or for the workspace
    nothing before a path in it and ``.`` for the workspace itself."""
    slash = "/" if found.endswith("/") else ""
    if word:
        return word + slash
    return "" if slash else "."


_BOT_FRAME = re.compile(r'^[ \t]*File "[^"\n]*/bot/(?:torch_adapter|suites|check|minify|commands|proc)[^"\n]*", '
                        r"line \d+, in [^\n]*\n(?:[ \t]+(?![ \t]*File \")[^\n]*\n)*", re.M)


def without_bot_frames(traceback: str) -> str:
    """A traceback without this bot's own frames (each frame's File line and the lines under it)."""
    if not traceback or "/bot/" not in traceback:
        return traceback
    return _BOT_FRAME.sub("", traceback if traceback.endswith("\n") else traceback + "\n").rstrip("\n") + (
        "\n" if traceback.endswith("\n") else "")


_PYTHON_FENCE = re.compile(r"^(`{3,})python\n.*?\n\1$", re.S | re.M)


def public_markdown(text: str, env: Mapping[str, str] | None = None) -> str:
    """:func:`public_text` over a markdown document, except its ```python blocks: a repro was
    verified as it is written (its inline inputs are base64, which can hold ``/tmp/``), and the bot
    writes repros without machine paths (inputs relative to the file; bot/minify/package.py)."""
    out, at = [], 0
    for m in _PYTHON_FENCE.finditer(text):
        out += [public_text(text[at:m.start()], env), m.group(0)]
        at = m.end()
    out.append(public_text(text[at:], env))
    return "".join(out)

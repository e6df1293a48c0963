"""Rendering: a jinja2 environment (StrictUndefined), the templates, escaping, and the size budget.

Templates live in ``templates/``, installed as the package ``bot.templates`` and read into memory
once per process (``--templates DIR`` overrides any of them by file name; a sandboxed jinja2
environment renders them):
    issue_title.j2, issue_body.md.j2, update_comment.md.j2, reopen_comment.md.j2,
    close_comment.md.j2, duplicate_comment.md.j2, summary.md.j2, dashboard.md.j2 (docs/dashboard.md)
Their variables are documented in docs/reporting.md.

Untrusted text (model names, error messages, logs, config values) only reaches markdown through the
filters below:
    {{ x | md }}            inline text: HTML-escaped, markdown punctuation escaped, one line,
                            @mentions and #references neutralized
    {{ x | code }}          an inline code span sized to its content (one line, neutralized; `|`
                            escaped, so a value in a table never leaves its cell)
    {{ x | fence("py") }}   a fenced block whose fence is longer than any backtick run inside;
                            HTML-comment delimiters are broken (code stays otherwise verbatim)
    {{ x | logfence }}      like fence, for logs: also neutralizes @mentions, #references and
                            anything that looks like an HTML comment (so no marker can be forged)
    {{ x | num }}           a number as plain text (6 significant digits); anything that is not a
                            number (an artifact can hold anything) goes through `md`
Every filter and every template's output pass through ``bot.public.public_text`` (no path of the runner:
workspace, home, venv, temp, libraries, caches), the filters before they escape, the output as a whole
after: nothing a template shows can bypass it. A ```python block (a verified repro) is shown as it was
verified: the bot writes repros without machine paths.
The renderer appends the hidden marker itself, after the template output, as the body's last line;
a template cannot omit or forge it.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from bot.fingerprint import make_marker
from bot.gha import ZWSP as ZWSP  # re-exported: bot.report.upstream undoes the neutralization
from bot.gha import break_comments, neutralize
from bot.public import public_markdown, public_text

BODY_LIMIT = 65536
# Headroom under GitHub's limit for the marker line and the budget's own arithmetic.
BODY_BUDGET = BODY_LIMIT - 1536


TEMPLATE_NAMES = ("issue_title.j2", "issue_body.md.j2", "update_comment.md.j2", "reopen_comment.md.j2",
                  "close_comment.md.j2", "duplicate_comment.md.j2", "summary.md.j2",
                  "dashboard.md.j2")

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>])")


def md(value) -> str:
    """Untrusted text as safe inline markdown (no markup, no pings, no HTML, one line)."""
    text = " ".join(public_text(str(value if value is not None else "")).split())
    text = html.escape(text, quote=False)
    text = _MD_SPECIAL.sub(r"\\\1", text)
    return neutralize(text)


def num(value) -> str:
    """A number from a run directory, as text; non-numbers are escaped like any untrusted text."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return md(value)
    if isinstance(value, int):
        return str(value) if abs(value) < 10 ** 15 else f"{value:.6g}"
    return f"{value:.6g}"


def _longest_run(text: str, ch: str) -> int:
    runs = re.findall(re.escape(ch) + "+", text)
    return max((len(r) for r in runs), default=0)


def code(value) -> str:
    """Untrusted text as one inline code span. A ``|`` is escaped as ``\\|``: a table row is split
    into cells on every pipe, backticks or not, and a value that ended its cell would put the rest
    of it into the next one as live markup (links, images, HTML); GFM reads ``\\|`` inside a table
    cell's code span as a plain pipe (outside a table, the backslash shows)."""
    text = neutralize(" ".join(public_text(str(value)).split()), bare_links=False).replace("|", "\\|")
    ticks = "`" * (_longest_run(text, "`") + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fence(value, lang: str = "") -> str:
    from bot.gha import BIDI_CONTROLS

    # bidirectional controls dropped: code that reads differently from how it runs ("trojan source")
    text = str(value if value is not None else "")
    if lang != "python":   # a repro is shown as it was verified (bot.public.public_markdown)
        text = public_text(text)
    text = break_comments(BIDI_CONTROLS.sub("", text).rstrip("\n"))
    ticks = "`" * max(3, _longest_run(text, "`") + 1)
    lang = re.sub(r"[^A-Za-z0-9_+-]", "", lang)
    return f"{ticks}{lang}\n{text}\n{ticks}"


def logfence(value, lang: str = "") -> str:
    return fence(neutralize(str(value if value is not None else ""), bare_links=False), lang)


def truncate_middle(text: str, limit: int, note: str = "") -> str:
    """Keep the head and (mostly) the tail, where a traceback's innermost frames are."""
    if text is None or len(text) <= limit:
        return text
    head = limit // 4
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters omitted{note} ...]\n{text[-tail:]}"


# The templates, read once per process and kept in memory (:func:`preload`): the package's own
# (``bot.templates``: the repository's templates/ in a development install, the installed package's
# data otherwise; never a directory found by its position beside the package, which other code of
# the same user could have written), with the files of an explicit ``--templates DIR`` over them.
_LOADED: dict[str | None, dict[str, str]] = {}


def _package_templates() -> dict[str, str]:
    from importlib import resources

    try:
        root = resources.files("bot.templates")
    except ModuleNotFoundError:
        root = None
    if root is None or not root.joinpath(TEMPLATE_NAMES[0]).is_file():
        # bot imported from a source tree that is not installed: the tree's own templates/, beside
        # the package it is the source of (its pyproject names it)
        here = Path(__file__).resolve().parent.parent
        project = here / "pyproject.toml"
        if not (project.is_file() and 'name = "minify-action"' in project.read_text(encoding="utf-8")):
            raise RuntimeError("minify-bot's templates are not installed (package bot.templates)")
        root = here / "templates"
    return {p.name: p.read_text(encoding="utf-8") for p in root.iterdir() if p.name.endswith(".j2")}


def preload(templates_dir: str | None = None) -> dict[str, str]:
    """Read the templates now (before anything else runs in this process or its children) and keep
    them for every :class:`Renderer` of this process."""
    if templates_dir not in _LOADED:
        found = dict(_package_templates())
        if templates_dir:
            if not Path(templates_dir).is_dir():
                from bot.errors import UsageError
                raise UsageError(f"--templates {templates_dir}: not a directory")
            found.update({p.name: p.read_text(encoding="utf-8") for p in Path(templates_dir).iterdir()
                          if p.name.endswith(".j2") and p.is_file()})
        _LOADED[templates_dir] = found
    return _LOADED[templates_dir]


class Renderer:
    def __init__(self, templates_dir: str | None = None):
        # a sandboxed environment: a template (``--templates``) formats text and cannot call into Python
        self.env = ImmutableSandboxedEnvironment(
            loader=jinja2.DictLoader(preload(templates_dir)),
            undefined=jinja2.StrictUndefined,
            autoescape=False,  # markdown, not HTML: escaping is explicit through the filters
            keep_trailing_newline=False,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.filters.update(md=md, code=code, fence=fence, logfence=logfence, neutralize=neutralize, num=num)

    def render(self, name: str, **ctx) -> str:
        try:
            return public_markdown(self.env.get_template(name).render(**ctx)).strip() + "\n"
        except jinja2.UndefinedError as exc:
            from bot.errors import UsageError
            raise UsageError(f"template {name}: {exc.message}") from None
        except jinja2.TemplateError as exc:
            from bot.errors import UsageError
            raise UsageError(f"template {name}: {exc}") from None

    def title(self, ctx: dict) -> str:
        text = " ".join(self.render("issue_title.j2", **ctx).split())
        return text[:250]

    def body(self, ctx: dict, state: dict, limit: int = BODY_BUDGET) -> tuple[str, list[str]]:
        """The issue body with its marker, never longer than ``limit`` characters. Returns
        (body, overflow): overflow names what was shortened or moved to the artifacts."""
        marker = make_marker(state)
        ctx = dict(ctx)
        ctx.setdefault("overflow", [])
        room = limit - len(marker) - 2
        text = self.render("issue_body.md.j2", **ctx)
        for step in _BUDGET_STEPS:
            if len(text) <= room:
                break
            ctx = step(ctx)
            text = self.render("issue_body.md.j2", **ctx)
        if len(text) > room:  # last resort: cannot happen with the stock template
            cut = max(room - 200, 0)  # a marker that leaves no room for text keeps none (never a negative cut)
            text = text[:cut] + "\n\n[... body truncated to fit GitHub's limit; see the artifacts ...]\n"
            ctx["overflow"].append("body")
        return text.rstrip("\n") + "\n\n" + marker + "\n", list(ctx["overflow"])

    def comment(self, name: str, ctx: dict, limit: int = BODY_BUDGET) -> str:
        text = self.render(name, **ctx)
        if len(text) > limit:
            text = text[: limit - 200] + "\n\n[... comment truncated; see the artifacts ...]\n"
        return text


# ---------------------------------------------------------------------------- the budget
# Each step shortens one thing and records it in ctx["overflow"]. Required sections (summary,
# repro, failure details, versions, links, how to reproduce) are never dropped; the repro is
# linked instead of inlined only when everything else has already been cut.

def _with(ctx: dict, note: str, **changes) -> dict:
    new = dict(ctx)
    new.update(changes)
    new["overflow"] = list(ctx["overflow"]) + ([note] if note not in ctx["overflow"] else [])
    return new


def _error_field(ctx: dict, key: str, limit: int) -> dict:
    err = ctx.get("error")
    if not err or not err.get(key) or len(err[key]) <= limit:
        return ctx
    new_err = dict(err)
    new_err[key] = truncate_middle(err[key], limit, "; the full text is in the artifacts")
    return _with(ctx, "traceback" if key == "traceback" else "error message", error=new_err)


def _step_traceback_20k(ctx):
    return _error_field(ctx, "traceback", 20000)


def _dropping(key: str, what: str, empty):
    """A step that leaves out the context's ``key`` (saying ``what`` was left out), if it has one."""
    def step(ctx):
        return _with(ctx, what, **{key: empty}) if ctx.get(key) else ctx

    step.__name__ = f"_step_drop_{key}"
    return step


_step_collect_env = _dropping("collect_env", "collect_env", None)
_step_full_diff = _dropping("config_diff", "full config diff", [])


def _step_traceback_4k(ctx):
    return _error_field(ctx, "traceback", 4000)


def _step_affected(ctx):
    rows = ctx.get("affected") or []
    if len(rows) <= 20:
        return ctx
    return _with(ctx, "affected configurations", affected=rows[:20], affected_omitted=len(rows) - 20)


def _step_message(ctx):
    return _error_field(ctx, "message", 2000)


_step_minifier_log = _dropping("log_excerpt", "log excerpt", None)


def _step_repro_link(ctx):
    repro = ctx.get("repro") or {}
    if not repro.get("inline"):
        return ctx
    new = dict(repro)
    new["inline"] = None
    new["too_big"] = True
    return _with(ctx, "repro", repro=new)


def _step_traceback_1k(ctx):
    return _error_field(ctx, "traceback", 1000)


def _step_generated_code(ctx):
    """The generated code's block goes first: the body says it is in the artifacts instead."""
    gen = ctx.get("generated_code") or {}
    if not gen.get("code"):
        return ctx
    return _with(ctx, "generated code", generated_code={**gen, "code": None})


_BUDGET_STEPS = [_step_generated_code, _step_traceback_20k, _step_collect_env, _step_full_diff, _step_traceback_4k,
                 _step_affected, _step_message, _step_minifier_log, _step_repro_link, _step_traceback_1k]

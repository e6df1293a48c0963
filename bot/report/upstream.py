"""The way upstream: a bot issue (or a run directory's failure) as a pytorch/pytorch bug report, and the
upstream issues that may already describe it.

- ``facts_from_failure`` / ``facts_from_issue``: what the report says, from a failure record (and its
  repro) or from a bot issue's body and hidden state. Every artifact field passes an allowlist or is
  escaped where it is rendered.
- ``related``: at most ``MAX_QUERIES`` searches of the upstream repository (``GET /search/issues``,
  ``bot.tracker.github.IssueSearch``) by the culprit ops, the error's distinctive words and the failure
  class; up to ``MAX_RELATED`` issues. A search that fails (rate limit, 422, garbage, timeout) leaves one
  line saying so; it never fails the report.
- ``render``: ``templates/upstream_report.md.j2``, the fields of PyTorch's torch.compile bug template
  (.github/ISSUE_TEMPLATE/pt2-bug-report.yml: "🐛 Describe the bug", "Error logs", "Versions").
- the checkbox: a bot issue's body carries "- [ ] write an upstream report"; ``answer_ticks`` (the
  report, after its updates) comments the report on each issue whose box is ticked and rewrites the box
  as done; ``carry_box`` keeps a ticked or done box when the report rewrites the body.

Nothing here posts to the upstream repository. Related issues are shown as ``owner/name#​N`` (broken
reference) and their URL in a code span, so that a comment on the bot's issue creates no
cross-reference on the upstream issue.
"""

from __future__ import annotations

import builtins
import dataclasses
import re
from pathlib import Path

from bot import rundir, safejson
from bot import signature as sg
from bot.failure import FailureRecord
from bot.records import CheckError, CheckRow, Repro
from bot.render import ZWSP, break_comments, code, md, num
from bot.report.context import CLASS_WORDS, DEVICES, INLINE_REPRO_LIMIT, title_dtype, title_ops
from bot.report.load import Failure
from bot.report.state import IssueState
from bot.report.view import ReportView
from bot.slash import BACKEND_RE, MODES, safe
from bot.tracker.base import Issue

UPSTREAM_REPO = "pytorch/pytorch"
MAX_QUERIES = 3
MAX_RELATED = 5
# the plain repro (bot/minify/worker/plain.py: public torch APIs only), preferred when a failure has one
REPRO_PLAIN = getattr(rundir, "PLAIN", None)
TRACEBACK_LIMIT = 6000
COLLECT_ENV_LIMIT = 12000
TEMPLATE = "upstream_report.md.j2"

_OP = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,119}")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,59}")
_STAGE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,59}(?::[A-Za-z_][A-Za-z0-9_]{0,59})?")
_EXC = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,119}")
_REPO = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}/[A-Za-z0-9_.-]{1,100}")
_OVERLOADS = ("default", "Tensor", "Scalar", "int", "out", "self", "dim", "float")


@dataclasses.dataclass
class Facts:
    """What an upstream report says about one bug. Strings marked (untrusted) come from artifacts or
    an issue body and are escaped where they are rendered; the others passed an allowlist."""

    source: str                                   # "issue #12", "failures/<check id>"
    failure_class: str = "failure"                # a key of CLASS_WORDS, or "failure"
    stage: str | None = None
    backend: str | None = None
    mode: str | None = None
    device: str | None = None                     # a device type (cuda, not cuda:1)
    dtype: str | None = None
    ops: list[str] = dataclasses.field(default_factory=list)       # culprit op names
    culprit_method: str | None = None             # compiled-alone | graph | bisector
    bisect: str | None = None                     # the bisector's one-line answer (untrusted)
    models: list[str] = dataclasses.field(default_factory=list)    # (untrusted)
    error_type: str | None = None
    error_message: str | None = None              # (untrusted)
    messages: list[str] = dataclasses.field(default_factory=list)  # normalized compiler messages (untrusted)
    traceback: str | None = None                  # (untrusted)
    accuracy: dict | None = None                  # tolerance, rmse_res, rmse_ref, max_abs_diff (numbers)
    failure_md: str | None = None                 # a bot issue's "Failure" section, as the bot rendered it
    repro: str | None = None                      # (untrusted)
    repro_from: str | None = None                 # where the repro came from, for the report's words
    verification: dict | None = None              # runs, failed_same_way, random_inputs_reproduce
    nodes: tuple | None = None                    # (before, after) graph nodes
    ablation: list[dict] = dataclasses.field(default_factory=list)  # [{backend, status}] (untrusted)
    config: list[dict] = dataclasses.field(default_factory=list)    # minimal config diff (untrusted)
    versions: dict = dataclasses.field(default_factory=dict)        # failure.json's versions (untrusted)
    collect_env: str | None = None                # torch's collect_env output (untrusted)
    issue_url: str | None = None


# ---------------------------------------------------------------------------- facts from a run directory

def short_op(op: str) -> str:
    """aten.index_add.default -> index_add; aten.relu -> relu; torch.ops.aten.mm.default -> mm"""
    parts = [p for p in op.split(".") if p not in ("torch", "ops")]
    if len(parts) >= 2 and parts[0] in ("aten", "prims", "quantized", "_c10d_functional"):
        return parts[1]
    if len(parts) >= 2 and parts[-1] in _OVERLOADS:
        return parts[-2]
    return parts[-1] if parts else op


def _repro_of(f: Failure) -> tuple[str | None, str | None]:
    """The failure's repro: the plain repro when its directory has one (and its record does not say
    that it failed to reproduce), else the record's repro."""
    rec = f.failure
    plain = getattr(rec.repro, "plain", None) if rec is not None else None
    refuted = plain is not None and getattr(plain, "runs", 0) and not getattr(plain, "failed_same_way", 0)
    # the short form (what the issue shows) when it failed the same way in all its runs, else the plain one
    names = ([rundir.SHORT] if plain is not None and not refuted and plain.short_reproduces else []) + (
        [REPRO_PLAIN] if REPRO_PLAIN and not refuted else [])
    for name in names if f.dir is not None else []:
        path = Path(f.dir) / name
        if path.is_file() and not path.is_symlink():
            try:
                return path.read_text(encoding="utf-8", errors="replace"), f"failures/{f.check.id}/{name}"
            except OSError:
                pass
    if f.repro_text:
        return f.repro_text, f"failures/{f.check.id}/{(rec.repro if rec else Repro()).path or rundir.REPRO}"
    return None, None


def facts_from_failure(f: Failure) -> Facts:
    """A run directory's failure (its check row, failure.json and repro) as report facts."""
    rec, check = f.failure, f.check
    parts = f.fingerprint.parts
    sig = f.fingerprint.signature
    facts = _check_facts(Facts(source=f"failures/{check.id}"), check, parts, sig.messages if sig else [])
    if rec is not None:
        _record_facts(facts, rec, parts)
    error = (rec.error if rec else None) or check.error
    _error_facts(facts, error)
    acc = (rec.accuracy if rec else None) or check.accuracy
    if acc is not None and facts.failure_class == "accuracy":
        facts.accuracy = {k: v for k, v in acc.to_json().items() if k != "cosine"}
        facts.accuracy["cosine"] = bool(acc.cosine)
    facts.repro, facts.repro_from = _repro_of(f)
    if facts.repro and len(facts.repro) > INLINE_REPRO_LIMIT:
        facts.repro = None  # too big to paste: the report names the file instead
    return facts


def _check_facts(facts: Facts, check: CheckRow, parts: dict, messages: list) -> Facts:
    """The check's facts; ``messages``: the failure's normalized error lines (its signature's, also
    where the fingerprint is keyed on the culprit instead)."""
    cls = parts.get("class") or check.failure_class
    facts.failure_class = cls if cls in CLASS_WORDS else "failure"
    facts.stage = safe(parts.get("stage"), _STAGE, None)
    facts.backend = safe(check.backend, BACKEND_RE, None)
    facts.mode = check.mode if check.mode in MODES else None
    facts.device = parts.get("device") if parts.get("device") in DEVICES else None
    facts.dtype = safe(parts.get("dtype") or check.dtype, _WORD, None)
    facts.models = [str(check.model)[:200]] if check.model else []
    facts.messages = [str(m)[:300] for m in messages[:3]]
    return facts


def _record_facts(facts: Facts, rec: FailureRecord, parts: dict) -> None:
    ops, answer, method = rec.culprit_found()
    if rec.repro_verified:
        named, _ = title_ops(parts, rec)
        ops = named + [o for o in ops if o not in named]
        facts.dtype = safe(title_dtype(parts, rec), _WORD, None) or facts.dtype   # as the bot's issue names it
    facts.ops = [o for o in ops if _OP.fullmatch(o)][:10]
    facts.culprit_method = method if method in ("compiled-alone", "graph", "bisector") else None
    facts.bisect = (rec.culprit.bisect if rec.culprit and isinstance(rec.culprit.bisect, str) else answer)
    if rec.repro_verified and rec.repro.verification is not None:
        facts.verification = rec.repro.verification.to_json()
    r = rec.repro
    if isinstance(r.nodes_before, int) and isinstance(r.nodes_after, int):
        facts.nodes = (r.nodes_before, r.nodes_after)
    facts.ablation = [{"backend": str(a.backend), "status": str(a.status)} for a in rec.ablation or []][:10]
    facts.config = [d.to_json() for d in (rec.config.minimal or [])][:20]
    facts.versions = dict(rec.versions or {})
    facts.collect_env = rec.collect_env if isinstance(rec.collect_env, str) else None


def _error_facts(facts: Facts, error: CheckError | None) -> None:
    if error is None:
        return
    facts.error_type = safe(error.type, _EXC, None)
    facts.error_message = str(error.message)[:4000] if error.message else None
    from bot.public import without_bot_frames

    facts.traceback = without_bot_frames(str(error.traceback)) if error.traceback else None


# ---------------------------------------------------------------------------- facts from a bot issue

_TITLE = re.compile(r"\[minify-bot\] (?P<stage>\S+): (?P<words>.+?)(?: in .+?)?(?: \((?P<exc>[\w.]+)\))?"
                    r" \((?P<dtype>\w+), (?P<device>\w+)\)(?: \[flaky\])?$")


def _sections(body: str) -> dict[str, str]:
    """The body's ``### Heading`` sections (heading -> text), fenced blocks kept whole."""
    out: dict[str, list[str]] = {}
    current, fence = None, ""
    for line in body.splitlines():
        m = re.match(r"^(`{3,})", line)
        if m and (not fence or (line.strip() == fence)):
            fence = "" if fence else m.group(1)
        elif not fence and line.startswith("### "):
            current = line[4:].strip()
            out[current] = []
            continue
        if current is not None:
            out[current].append(line)
    return {k: "\n".join(v).strip("\n") for k, v in out.items()}


_FENCE = re.compile(r"^(`{3,})([A-Za-z0-9_+-]*)\n(.*?)\n\1$", re.S | re.M)


def _fenced(text: str, lang: str | None) -> str | None:
    """The first fenced block of ``text`` (with info string ``lang`` when given)."""
    for m in _FENCE.finditer(text or ""):
        if lang is None or m.group(2) == lang:
            return m.group(3)
    return None


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text.replace(ZWSP, "")).replace("&lt;", "<").replace("&gt;", ">") \
        .replace("&amp;", "&")


def _versions_table(section: str) -> dict:
    """The Versions section's ``| key | `value` |`` rows."""
    out = {}
    for m in re.finditer(r"^\| (.+?) \| (`+) ?(.*?) ?\2 \|$", section or "", re.M):
        key, value = _unescape(m.group(1)).strip(), m.group(3).replace(ZWSP, "").replace("\\|", "|")
        if key and re.fullmatch(r"[A-Za-z0-9_ .-]{1,40}", key):
            try:
                out[key] = safejson.loads(value) if key == "gpus" and value.startswith("[") else value
            except ValueError:
                out[key] = value
    return out


def facts_from_issue(number: int, title: str, body: str, state: IssueState | None, url: str | None = None) -> Facts:
    """A bot issue (its author checked by the caller) as report facts: the title's words, the hidden
    state's signature and affected checks, and the body's repro, failure, culprit and versions sections."""
    facts = Facts(source=f"issue #{number}", issue_url=url)
    m = _TITLE.match(" ".join(str(title).split()))
    if m:
        words = {v: k for k, v in CLASS_WORDS.items()}
        facts.failure_class = words.get(m.group("words"), "failure")
        facts.stage = safe(m.group("stage"), _STAGE, None)
        facts.dtype = safe(m.group("dtype"), _WORD, None)
        facts.device = m.group("device") if m.group("device") in DEVICES else None
        facts.error_type = safe(m.group("exc"), _EXC, None)
    if state is not None:
        _state_facts(facts, state)
    sections = _sections(body or "")
    repro = _fenced(sections.get("Minimized repro", ""), "python")
    if repro:
        facts.repro, facts.repro_from = _unescape_repro(repro), "the issue's minimized repro"
    culprit = sections.get("Culprit", "").split("\n", 1)[0]
    named = [c for c in re.findall(r"`([^`\n]{1,120})`", culprit.split(":", 1)[0]) if _OP.fullmatch(c)]
    facts.ops = list(dict.fromkeys(named + facts.ops))[:10]
    if named and "fails when compiled alone" in culprit:
        facts.culprit_method = "compiled-alone"
    failure = sections.get("Failure")
    if failure and len(failure) > 20000:  # never cut inside a block: keep what precedes the details
        failure = failure.split("<details>", 1)[0].strip()[:4000] + "\n\n(shortened: the full error is in the issue)"
    facts.failure_md = break_comments(failure) if failure else None
    versions = sections.get("Versions", "")
    facts.versions = _versions_table(versions)
    env = _fenced(versions.split("<summary>collect_env</summary>", 1)[1], None) \
        if "<summary>collect_env</summary>" in versions else None
    facts.collect_env = env.replace(ZWSP, "") if env else None
    return facts


def _unescape_repro(text: str) -> str:
    """The repro as the bot's fence filter wrote it, less the zero-width spaces it put into comment
    delimiters (the report's own fence filter breaks them again)."""
    return text.replace("<" + ZWSP + "!", "<!").replace("-" + ZWSP + "->", "-->")


def _state_facts(facts: Facts, state: IssueState) -> None:
    sig = state.known.signature if state.known is not None else None
    if sig is not None:
        facts.failure_class = sig.failure_class if sig.failure_class in CLASS_WORDS else facts.failure_class
        facts.stage = safe(sig.stage, _STAGE, facts.stage)
        facts.ops = [o for o in sig.culprit_ops if isinstance(o, str) and _OP.fullmatch(o)][:10]
        facts.bisect = sig.bisect if isinstance(sig.bisect, str) else None
        facts.culprit_method = sig.culprit_method if sig.culprit_method in ("compiled-alone", "graph") else None
        facts.error_type = safe(sig.exc_type, _EXC, facts.error_type)
        facts.messages = [str(x)[:300] for x in sig.messages[:3]]
    rows = state.affected[:50]
    facts.models = list(dict.fromkeys(str(a.model)[:200] for a in rows))
    if rows:
        a = rows[0]
        facts.backend = safe(a.backend, BACKEND_RE, None)
        facts.mode = a.mode if a.mode in MODES else None
        facts.device = facts.device or (a.device if a.device in DEVICES else None)
        facts.dtype = facts.dtype or safe(a.dtype, _WORD, None)


# ---------------------------------------------------------------------------- possibly related upstream issues

CLASS_TERMS = {"accuracy": "accuracy", "compile_error": '"compile error"', "runtime_error": '"runtime error"',
               "crash": "crash", "timeout": "hang", "oom": '"out of memory"'}
_STOP = frozenset("""a an and are as at be been but by can cannot could did do does for from had has have if in into
is it its may must no not of on or our should so than that the their then there these this to was were when where
which while will with would you your error errors failed fail fails failure line file expected got found value
values none true false self object type args kwargs tensor tensors torch""".split())


def _term(word: str) -> str | None:
    """A search term made safe: letters, digits and ``_.+-`` only, no leading ``-`` (a NOT), no
    qualifier (``x:y``)."""
    w = re.sub(r"[^A-Za-z0-9_.+-]", "", word).lstrip("-.")
    return w[:60] if len(w) >= 2 else None


# what bot.signature.normalize_line puts for temporaries and numbered kernel names (tmp42 -> tmpN)
_PLACEHOLDER = re.compile(r"(?:tmp|buf|arg|primals|tangents|getitem|x|in_ptr|out_ptr|in_out_ptr|ks|s)N|\w*_N")


def error_words(facts: Facts, limit: int = 4) -> list[str]:
    """The error's type (its last dotted part, wrappers skipped) and a few distinctive words of its
    message: paths, numbers, addresses, hashes and temporary names removed (bot.signature's
    normalization), common words dropped, the longest kept, in their order."""
    out = []
    exc = (facts.error_type or "").rsplit(".", 1)[-1]
    if exc and exc not in sg.WRAPPERS:
        out.append(exc)
    text = " ".join(facts.messages) or (facts.error_message or "").strip().split("\n", 1)[0]
    text = re.sub(r"(?:[A-Za-z]:)?(?:/[^\s:'\"]+)+|<\w+>", " ", text[:500])  # paths, normalized placeholders
    # whole words only: "tmp42", "0xdead", "torch._inductor" and "a/b" are not words
    words = re.findall(r"(?<![\w./\\-])[A-Za-z_]{3,40}(?![\w./\\-])", text)
    words = [w for w in dict.fromkeys(words) if w.lower() not in _STOP and not w.startswith("_") and w != exc
             and not _PLACEHOLDER.fullmatch(w)
             and not (w.endswith(("Error", "Exception")) and hasattr(builtins, w))]  # AssertionError says little
    keep = set(sorted(words, key=len, reverse=True)[:limit])
    out += [w for w in words if w in keep]
    return [t for t in map(_term, out) if t]


def queries(facts: Facts, repo: str) -> list[str]:
    """At most MAX_QUERIES searches of ``repo``'s issues: by the culprit ops, by the error's words, by
    the failure class (with the stage and the first op), each ``repo:R is:issue`` and its terms."""
    ops = [t for t in dict.fromkeys(_term(short_op(o)) for o in facts.ops) if t]
    if not ops and facts.bisect:
        ops = [t for t in map(_term, re.findall(r"[a-z_][a-z0-9_]{1,40}", facts.bisect.split(":", 1)[-1])) if t][:2]
    where = facts.stage or facts.backend
    stage = _term(re.split(r"[.:]", where)[0]) if where and where != "eager" else None
    groups = []
    if ops:
        groups.append(ops[:2] + ([stage] if stage else []))
    words = error_words(facts)
    if words:
        groups.append(words)
    cls = CLASS_TERMS.get(facts.failure_class)
    if cls:
        groups.append([cls] + ([stage] if stage else []) + ops[:1]
                      + ([facts.device] if facts.device == "cuda" and not ops else []))
    out = []
    for terms in groups:
        q = f"repo:{repo} is:issue " + " ".join(terms)
        if q not in out:
            out.append(q)
    return out[:MAX_QUERIES]


@dataclasses.dataclass
class Related:
    """The possibly related upstream issues, and one line on how the search went."""

    repo: str
    items: list = dataclasses.field(default_factory=list)   # bot.tracker.github.FoundIssue
    queries: list[str] = dataclasses.field(default_factory=list)
    searched: int = 0                                       # queries answered
    failed: str | None = None                               # why a search gave no answer
    skipped: str | None = None                              # why nothing was searched

    @property
    def line(self) -> str:
        if self.skipped:
            return f"related issues: not searched ({self.skipped})"
        if self.failed and not self.items:
            return f"related issues: could not search ({self.failed})"
        n = len(self.items)
        found = f"{n} possibly related issue{'s' if n != 1 else ''} found" if n else "none found"
        line = f"related issues: {found} in {self.repo} ({self.searched} of {len(self.queries)} searches answered)"
        return line + (f"; a search failed ({self.failed})" if self.failed else "")


def related(search, facts: Facts, repo: str = UPSTREAM_REPO, own_repo: str | None = None) -> Related:
    """Search ``repo`` for issues like this one. ``search`` is a ``bot.tracker.github.IssueSearch``
    (None: not searched). The bot's own repository is never searched as upstream, and results outside
    ``repo`` are dropped. Issues found by more queries come first. Never raises for a search."""
    from bot.tracker.github import SearchFailed

    rel = Related(repo=repo, queries=queries(facts, repo))
    if not _REPO.fullmatch(repo or ""):
        rel.skipped = "the upstream repository must be owner/name"
    elif own_repo and own_repo.lower() == repo.lower():
        rel.skipped = f"{repo} is the bot's own repository, not upstream"
    elif search is None:
        rel.skipped = "no network: the local tracker does not search"
    elif not rel.queries:
        rel.skipped = "no culprit op, error or failure class to search by"
    if rel.skipped:
        return rel
    hits: dict[int, list] = {}
    for k, q in enumerate(rel.queries):
        try:
            _, found = search.search(q, MAX_RELATED)
        except SearchFailed as exc:
            rel.failed = exc.reason
            if exc.reason == "rate limited" or exc.reason.startswith(("timed out", "unreachable")):
                break  # the next search would fare no better
            continue
        rel.searched += 1
        for pos, item in enumerate(found):
            if item.repo.lower() == repo.lower():
                hits.setdefault(item.number, [item, 0, k, pos])[1] += 1
    ranked = sorted(hits.values(), key=lambda h: (-h[1], h[2], h[3]))
    rel.items = [h[0] for h in ranked[:MAX_RELATED]]
    return rel


# ---------------------------------------------------------------------------- the report

_WHAT = {
    "accuracy": "`torch.compile` returns wrong results",
    "compile_error": "`torch.compile` fails to compile the model",
    "runtime_error": "the compiled code fails when it runs",
    "crash": "the compiled code crashes the process",
    "timeout": "the compiled run does not finish (timeout)",
    "oom": "the compiled run runs out of memory",
}


def _context_words(f: Facts) -> str:
    bits = []
    if f.backend:
        bits.append(f"with backend {code(f.backend)}" + (f" ({f.mode})" if f.mode else ""))
    if f.device:
        bits.append(f"on {code(f.device)}")
    if f.dtype:
        bits.append(f"in {code(f.dtype)}")
    return (" " + " ".join(bits)) if bits else ""


def _what_sentence(f: Facts) -> str:
    what = _WHAT.get(f.failure_class, f"the compiled model fails ({CLASS_WORDS.get(f.failure_class, 'failure')})")
    line = what[0].upper() + what[1:] + _context_words(f)
    acc = f.accuracy or {}
    if f.failure_class == "accuracy" and acc.get("rmse_res") is not None:
        line += (f": compared with an fp64 reference, the compiled output's RMSE is {num(acc.get('rmse_res'))} "
                 f"against eager's {num(acc.get('rmse_ref'))} (tolerance {num(acc.get('tolerance'))}"
                 + (", judged by cosine similarity" if acc.get("cosine") else "") + ")")
    elif f.error_type:
        line += f": {code(f.error_type)}"
    return line + "."


def description(f: Facts) -> list[str]:
    """The bug in words, one escaped paragraph per item: what fails and where, which stage, the
    culprit, the settings it needs, the models it was found on."""
    out = [_what_sentence(f)]
    if f.stage:
        passing = [md(a["backend"]) for a in f.ablation if a.get("status") == "pass"]
        out.append(f"It first fails at the {code(f.stage)} stage"
                   + (f" ({', '.join(passing)} pass)" if passing else "") + ".")
    if f.ops:
        ops = ", ".join(code(o) for o in f.ops)
        out.append(f"The culprit: {ops}, which fail{'s' if len(f.ops) == 1 else ''} when compiled alone."
                   if f.culprit_method == "compiled-alone" else f"The minimized graph's ops: {ops}.")
    if f.bisect:
        out.append(f"torch's CompilerBisector points at {code(f.bisect[:300])}.")
    if f.config:
        settings = ", ".join(code(f"{c.get('key')} = {c.get('value')!r}") for c in f.config)
        out.append(f"It fails only with these non-default settings: {settings}.")
    if f.models:
        names = ", ".join(md(m) for m in f.models[:5]) + (f" and {len(f.models) - 5} more" if len(f.models) > 5 else "")
        out.append(f"Found by an automated torch.compile accuracy check (minify-bot) on: {names}.")
    return out


def repro_words(f: Facts) -> str:
    """What the minimal repro is: how far it was minimized and how it was verified (escaped)."""
    words = []
    if f.nodes:
        words.append(f"minimized from {num(f.nodes[0])} to {num(f.nodes[1])} graph nodes")
    v = f.verification or {}
    if v.get("runs"):
        words.append(f"it failed the same way in {num(v.get('failed_same_way'))} of {num(v.get('runs'))} "
                     f"fresh processes" + (", with random inputs" if v.get("random_inputs_reproduce") else ""))
    return "; ".join(words)


def error_logs(f: Facts) -> str | None:
    """The error (type, message, the innermost part of the traceback) or the accuracy figures, as
    plain text for a log block; None when there are neither (an issue's Failure section then)."""
    acc = f.accuracy or {}
    if f.failure_class == "accuracy" and acc:
        rows = [("RMSE (compiled vs fp64)", acc.get("rmse_res")), ("RMSE (eager vs fp64)", acc.get("rmse_ref")),
                ("tolerance", acc.get("tolerance")), ("max abs diff", acc.get("max_abs_diff"))]
        return "Accuracy check failed (torch._dynamo.utils.same against an fp64 reference):\n" + "\n".join(
            f"  {k + ':':<26}{v}" for k, v in rows if isinstance(v, (int, float)) and not isinstance(v, bool))
    if not (f.error_type or f.error_message or f.traceback):
        return None
    text = f"{f.error_type or 'Error'}: {f.error_message or ''}".strip()
    tb = f.traceback or ""
    if tb:
        tb = tb if len(tb) <= TRACEBACK_LIMIT else "[... traceback shortened ...]\n" + tb[-TRACEBACK_LIMIT:]
        text += "\n\n" + tb
    return text


def collect_env_text(versions: dict, device: str | None = None) -> str:
    """failure.json's versions in the shape of torch's collect_env output (its labels, in its order),
    "unknown" where the record does not say; None of a key the record has but left empty reads as
    collect_env would print it for a build without it."""
    v = versions or {}

    def say(key, none="None"):
        if key not in v:
            return "unknown"
        x = v.get(key)
        return none if x in (None, "", []) else " ".join(str(x).split())[:300]

    gpus = v.get("gpus")
    if isinstance(gpus, list) and gpus:
        gpu_text = "\n".join(f"GPU {i}: {' '.join(str(g).split())[:200]}" for i, g in enumerate(gpus[:16]))
    else:
        gpu_text = "No CUDA" if "gpus" in v and "cuda" in v and not v.get("cuda") else "unknown"
    cxx = say("cxx", "unknown")
    cuda_known = "cuda" in v
    lines = [
        f"PyTorch version: {say('torch', 'unknown')}",
        f"PyTorch git version: {say('torch_git', 'unknown')}",
        "Is debug build: unknown",
        f"CUDA used to build PyTorch: {say('cuda')}",
        "",
        f"OS: {say('os', 'unknown')}",
        f"GCC version: {cxx if 'clang' not in cxx.lower() else 'unknown'}",
        f"Clang version: {cxx if 'clang' in cxx.lower() else 'unknown'}",
        "",
        f"Python version: {say('python', 'unknown')}",
        f"Is CUDA available: {'True' if device == 'cuda' or (isinstance(gpus, list) and gpus) else 'unknown'}",
        # the record's CUDA is torch's build (torch.version.cuda), which is the runtime a wheel ships
        f"CUDA runtime version: {say('cuda', 'No CUDA')}",
        f"GPU models and configuration: {gpu_text}",
        f"Nvidia driver version: {say('driver', 'unknown')}",
        f"cuDNN version: {say('cudnn', 'unknown' if not cuda_known or v.get('cuda') else 'No CUDA')}",
        "",
        "Versions of relevant libraries:",
        *[f"[pip3] {k}=={' '.join(str(v[k]).split())[:100]}" for k in ("torch", "triton") if v.get(k)],
    ]
    return "\n".join(lines).rstrip()


def suggested_title(f: Facts) -> str:
    """A title for the upstream issue, made of allowlisted words only (so it is shown as it is)."""
    ops = ", ".join(dict.fromkeys(short_op(o) for o in f.ops[:3]))
    where = ", ".join(x for x in (f.dtype, f.device) if x)
    return (f"[{f.stage or f.backend or 'torch.compile'}] {CLASS_WORDS.get(f.failure_class, 'failure')}"
            + (f" in {ops}" if ops else (f" ({f.error_type})" if f.error_type else ""))
            + (f" ({where})" if where else ""))


def render(renderer, facts: Facts, rel: Related, *, related_only: bool = False, comment: bool = False) -> str:
    """The report (templates/upstream_report.md.j2); ``related_only``: only the related issues;
    ``comment``: wrapped for a comment on the bot's issue (the report collapsed in <details>)."""
    items = [{"ref": f"{i.repo}#{i.number}", "title": i.title, "state": i.state, "url": i.url} for i in rel.items]
    env = facts.collect_env
    if env and len(env) > COLLECT_ENV_LIMIT:
        env = env[:COLLECT_ENV_LIMIT] + "\n[... collect_env shortened ...]"
    return renderer.render(
        TEMPLATE, related_only=related_only, comment=comment, title=suggested_title(facts),
        description=description(facts), ablation=facts.ablation, repro=facts.repro,
        repro_words=repro_words(facts), repro_from=facts.repro_from, error_logs=error_logs(facts),
        failure_md=facts.failure_md, versions_text=env or collect_env_text(facts.versions, facts.device),
        related={"repo": rel.repo, "line": rel.line, "issues": items, "queries": rel.queries},
        source=facts.source, upstream_repo=rel.repo)


# ---------------------------------------------------------------------------- the checkbox on a bot issue

BOX_TAG = "<!-- minify-box:upstream -->"
DONE_TAG = "<!-- minify-box:upstream-done -->"
_BOX_LINE = re.compile(r"^[-*] \[[ xX]\] <!-- minify-box:upstream(?:-done)? -->.*$", re.M)
_TICKED = re.compile(r"^[-*] \[[xX]\] <!-- minify-box:upstream -->", re.M)
_DONE = re.compile(r"^[-*] \[[ xX]\] <!-- minify-box:upstream-done --> upstream report written in "
                   r"(?P<link>[^\s<>`\[\]()]{1,500})\s*$", re.M)
ENV_REPO = "MINIFY_BOT_UPSTREAM_REPO"          # the report's upstream repository (default pytorch/pytorch)
ENV_SEARCH_API = "MINIFY_BOT_SEARCH_API_URL"   # where the report searches it (default api.github.com)


def ticked(body: str | None) -> bool:
    """Whether the body's "write an upstream report" box is ticked (and not done yet)."""
    return bool(_TICKED.search(body or ""))


def done_line(link: str) -> str:
    return f"- [x] {DONE_TAG} upstream report written in {link}"


def mark_done(body: str, link: str) -> str:
    """The body with its ticked box rewritten as done, naming the comment."""
    return _BOX_LINE.sub(lambda _: done_line(link), body, count=1)


def carry_box(old_body: str | None, new_body: str) -> str:
    """The report rewrites a bug issue's body from its template, whose box is unticked: keep the old
    body's ticked box ticked (the request waits for this run's answer) and a done box done. Only a
    done line whose link passes a strict pattern is carried, rewritten by the bot."""
    done = _DONE.search(old_body or "")
    if done:
        keep = done_line(done.group("link"))
    elif ticked(old_body):
        keep = None  # the fresh line, ticked
    else:
        return new_body
    return _BOX_LINE.sub(lambda m: keep or re.sub(r"^([-*]) \[ \]", r"\1 [x]", m.group(0)), new_body, count=1)


def answer_ticks(rep: ReportView, failures: list[Failure]) -> None:
    """After the report's updates: for each open bot issue whose upstream box is ticked, one comment
    with the upstream report (collapsed) and the possibly related upstream issues, then the box is
    rewritten as done with the comment's link. Never in a pull-request run (it edits nothing). The
    search is the tracker's (``Tracker.upstream_search``: none for the local tracker); the upstream
    repository is $MINIFY_BOT_UPSTREAM_REPO (default pytorch/pytorch)."""
    import os

    if rep.opts.pr_run:
        return
    # the report's own reading of its issues: the author checked before the marker is read
    issues = [(i, s) for i, s in rep.bot_issues() if i.state == "open" and ticked(i.body)]
    if not issues:
        return
    search = rep.tracker.upstream_search(os.environ.get(ENV_SEARCH_API) or None)
    repo = os.environ.get(ENV_REPO) or UPSTREAM_REPO
    try:
        for issue, state in issues:
            _answer(rep, issue, state, failures, search, repo)
    finally:
        if search is not None:
            search.close()


def _answer(rep: ReportView, issue: Issue, state: IssueState, failures: list[Failure], search, repo: str) -> None:
    from bot import fingerprint as fp
    from bot.report.state import repro_rank

    group = [f for f in failures if f.fingerprint.primary in state.sigs]
    if group:
        facts = facts_from_failure(min(group, key=lambda f: repro_rank(f.failure)))
    else:
        facts = facts_from_issue(issue.number, issue.title, issue.body, state, issue.url)
    rel = related(search, facts, repo, getattr(rep.tracker, "repo_name", None))
    tag = fp.comment_tag("upstream", rep.run_id, state.sig)
    text = render(rep.renderer, facts, rel, comment=True)
    link = rep.tracker.comment(issue.number, _fit(text) + "\n\n" + tag + "\n", tag)
    rep.tracker.edit_issue(issue.number, body=mark_done(issue.body, str(link).replace(" ", "%20")))
    rep.record("updated", None, issue, f"upstream report written on request ({rel.line})", commented=True,
               fingerprint=state.sig)


def _fit(text: str) -> str:
    from bot.render import BODY_BUDGET

    text = text.rstrip("\n")
    return text if len(text) <= BODY_BUDGET else text[: BODY_BUDGET - 200] + "\n\n[... shortened ...]"

"""Known bugs, the trusted side: the process that holds the tracker (and its token) reads the open
bot issues' verified repros and writes known.json for the tokenless minify stage (bot/known.py has the
record and the rules). With the bot's public key (MINIFY_BOT_PUBLIC_KEY) here too, a repro the bot did
not sign is dropped already here, with a warning naming its issue; the minify side checks again."""

from __future__ import annotations

import os
import sys

from bot import fingerprint as fp
from bot import known as kn
from bot.known import KnownRepro, from_state, write


def collect(tracker, label: str, skip: set[int] = frozenset(), *, torch: str | None = None,
            public_key: str | None = None, say=lambda m: print(m, file=sys.stderr)) -> list[KnownRepro]:
    """The open bot issues with a reusable repro, less those in ``skip`` (re-minify requested) and
    those minified on a newer torch than ``torch`` (this run's). Only issues the bot wrote are read
    (author first, then the marker); a malformed state or known block is skipped with a warning
    naming the issue, the others are kept. With ``public_key``, so is a repro the bot did not sign
    (unsigned, or its signature does not verify: the login is shared by every workflow)."""
    from bot.report.state import read

    me = tracker.bot_login()
    out = []
    for issue in tracker.list_issues(label):
        if issue.state != "open" or issue.author != me or issue.number in skip:
            continue
        state, why = read(issue.body)
        if state is None:
            if why:
                say(f"warning: issue #{issue.number}: its hidden state is malformed and was ignored ({why})")
            continue
        raw = (fp.parse_marker(issue.body) or {}).get("known")
        if raw is None:
            continue
        bad = kn.check_block(raw)
        entry = from_state(issue.number, state.known, state.checks) if bad is None else None
        if entry is None:
            say(f"warning: issue #{issue.number}: its known repro is malformed and was ignored"
                f" ({bad or 'it does not unpack to its digest'}); its failures are minified afresh")
            continue
        why = kn.unverified(entry, public_key) if public_key else None
        if why is not None:
            say(f"warning: issue #{issue.number}: its known repro was ignored ({why}: only repros the bot "
                "signed are run); its failures are minified afresh")
            continue
        if torch is not None and not kn.torch_allows(entry, torch):   # (the known job runs before any check:
            #                                                             minify applies the rule with its own torch)
            say(f"known bug #{issue.number}: minified on torch {entry.record.torch or 'unknown'}, this run "
                f"checked torch {torch or 'unknown'}: minified afresh")
            continue
        out.append(entry)
    return sorted(out, key=lambda k: k.issue)


def prepare(run_dir, tracker, label: str = "minify-bot", *, reminify: bool = False,
            say=lambda m: print(m, file=sys.stderr), env=None) -> int:
    """The trusted side's one call before minify: write known.json (an empty list for --reminify;
    without the issues whose dashboard re-minify box is ticked). Returns how many repros it holds.
    Any tracker failure leaves an empty known.json: the run minifies everything; a malformed issue
    is skipped alone (``collect``). Only repros minified on this run's torch or an older one count,
    and, when ``env`` (default: this process's) holds MINIFY_BOT_PUBLIC_KEY, only those it verifies."""
    from bot import signing
    from bot.report import dashboard

    entries: list[KnownRepro] = []
    boxes: set[int] = set()
    if not reminify:
        try:
            key = signing.public_key_from_env(os.environ if env is None else env)
            boxes = dashboard.requests_from(tracker).reminify
            entries = collect(tracker, label, boxes, torch=_run_torch(run_dir), public_key=key, say=say)
        except Exception as exc:  # noqa: BLE001 - known bugs only save time: never stop the run for them
            say(f"known bugs not read (every failure is minified): {type(exc).__name__}: {exc}")
    write(run_dir, entries, sorted(boxes))
    if entries or boxes:
        say(f"known bugs: {len(entries)} open issue(s) with a verified repro"
            + (f"; re-minify asked for #{', #'.join(map(str, sorted(boxes)))}" if boxes else ""))
    return len(entries)


def _run_torch(run_dir) -> str | None:
    from bot import rundir
    from bot.builds import results_torch
    from bot.errors import UsageError

    try:
        return results_torch(rundir.read_results(run_dir))
    except (UsageError, OSError):
        return None

"""A tracker that keeps issues as files in a directory: no token, no network.

Layout (``DIR`` is ``--issues-dir``, default ``<run dir>/issues``)::

    DIR/
      .lock                 flock()ed while an operation runs, so concurrent reporters are safe
      <n>.json              the issue: number, title, body, state, state_reason, labels, assignees,
                            author, created_at, updated_at, comments [{id, body, created_at}]
      <n>.md                the same issue rendered for people: title, labels, body, then comments
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
from pathlib import Path

from bot.tracker.base import Issue, Tracker, TrackerError

LOCAL_LOGIN = "minify-bot"


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class LocalTracker(Tracker):
    name = "local"

    def __init__(self, directory: str | os.PathLike, login: str = LOCAL_LOGIN):
        self.dir = Path(directory)
        self.login = login
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TrackerError(f"cannot create issues directory {self.dir}: {exc.strerror}") from None

    @contextlib.contextmanager
    def _locked(self):
        with open(self.dir / ".lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def _load(self, number: int) -> dict:
        path = self.dir / f"{number}.json"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise TrackerError(f"local issue #{number} does not exist in {self.dir}") from None
        except ValueError:
            raise TrackerError(f"local issue file {path} is not valid JSON") from None

    def _save(self, rec: dict) -> None:
        n = rec["number"]
        tmp = self.dir / f".{n}.json.tmp"
        tmp.write_text(json.dumps(rec, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        os.replace(tmp, self.dir / f"{n}.json")
        md = [f"# #{n} {rec['title']}", "",
              f"state: {rec['state']}" + (f" ({rec['state_reason']})" if rec.get("state_reason") else ""),
              f"labels: {', '.join(rec['labels'])}", f"author: {rec['author']}", "", rec["body"] or ""]
        for c in rec["comments"]:
            md += ["", "---", f"comment {c['id']} ({c['created_at']})", "", c["body"]]
        tmp = self.dir / f".{n}.md.tmp"
        tmp.write_text("\n".join(md) + "\n", encoding="utf-8")
        os.replace(tmp, self.dir / f"{n}.md")

    def _issue(self, rec: dict) -> Issue:
        return Issue(number=rec["number"], title=rec["title"], body=rec["body"] or "", state=rec["state"],
                     labels=list(rec["labels"]), author=rec["author"],
                     url=(self.dir / f"{rec['number']}.md").as_posix(), state_reason=rec.get("state_reason"))

    def _numbers(self) -> list[int]:
        return sorted(int(p.stem) for p in self.dir.glob("*.json") if p.stem.isdigit())

    def records(self) -> list[dict]:
        """Every stored issue record (for tests and the summary)."""
        return [self._load(n) for n in self._numbers()]

    # ------------------------------------------------------------------ Tracker
    def bot_login(self) -> str:
        return self.login

    def list_issues(self, label: str) -> list[Issue]:
        with self._locked():
            return [self._issue(r) for r in self.records() if label in r["labels"]]

    def create_issue(self, title, body, labels, assignees, marker_sig) -> Issue:
        with self._locked():
            nums = self._numbers()
            n = (nums[-1] + 1) if nums else 1
            now = _now()
            rec = {"number": n, "title": title, "body": body, "state": "open", "state_reason": None,
                   "labels": list(dict.fromkeys(labels)), "assignees": list(assignees), "author": self.login,
                   "created_at": now, "updated_at": now, "closed_at": None, "comments": []}
            self._save(rec)
            return self._issue(rec)

    def edit_issue(self, number, *, body=None, state=None, state_reason=None, labels=None) -> Issue:
        with self._locked():
            rec = self._load(number)
            if body is not None:
                rec["body"] = body
            if state is not None and state != rec["state"]:
                rec["state"] = state
                rec["closed_at"] = _now() if state == "closed" else None
                rec["state_reason"] = state_reason or ("completed" if state == "closed" else "reopened")
            elif state_reason is not None:
                rec["state_reason"] = state_reason
            if labels is not None:
                rec["labels"] = list(dict.fromkeys(labels))
            rec["updated_at"] = _now()
            self._save(rec)
            return self._issue(rec)

    def comment(self, number, body, tag) -> str:
        with self._locked():
            rec = self._load(number)
            for c in rec["comments"]:
                if tag and tag in c["body"]:
                    return f"{self._issue(rec).url}#comment-{c['id']}"
            cid = 1 + max((c["id"] for c in rec["comments"]), default=0)
            rec["comments"].append({"id": cid, "body": body, "created_at": _now(), "author": self.login})
            rec["updated_at"] = _now()
            self._save(rec)
            return f"{self._issue(rec).url}#comment-{cid}"

    def get_issue(self, number) -> Issue:
        with self._locked():
            return self._issue(self._load(int(number)))

    def comments(self, number: int) -> list[dict]:
        return self._load(number)["comments"]

"""What one Action step knows and has said so far: inputs, event, outputs, summary lines, notes; and
the pull request it answers on (``PRContext``, read by :mod:`bot.action.pullrequest`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bot import gha
from bot.action.inputs import Inputs


@dataclass
class PRContext:
    """The pull request a /minify comment was made on: PyGithub handles and the bot's login."""

    gh: object
    repo: object
    issue: object
    comment: object | None
    login: str


@dataclass
class Context:
    env: dict
    inputs: Inputs
    event: gha.Event
    cmds: gha.Commands
    workdir: Path
    out: Path
    secrets: list[str] = field(default_factory=list)
    outputs: dict = field(default_factory=dict)
    summary: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    produced_results: bool = False  # this process ran check or merge
    prc: PRContext | None = None  # the pull request a /minify comment was made on, once read
    requester: str = ""  # the commenter's login
    answered: bool = False  # a reply or results comment was posted on it

    def output(self, name: str, value) -> None:
        self.outputs[name] = value


def default_out(env) -> Path:
    base = env.get("RUNNER_TEMP") or ""
    return Path(base) / "minify-out" if base else Path("minify-out")


def warn(ctx: Context, message: str, title: str | None = None) -> None:
    """A warning annotation, also kept in the summary's notes."""
    ctx.cmds.warning(gha.redact(message, ctx.secrets), title=title)
    ctx.notes.append(message)


def error(ctx: Context, message: str, title: str | None = None) -> None:
    ctx.cmds.error(gha.redact(message, ctx.secrets), title=title)


def http_reason(exc: Exception) -> str:
    status = getattr(exc, "status", None)
    return f"HTTP {status}" if status else type(exc).__name__

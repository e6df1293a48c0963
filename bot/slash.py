"""The `/minify` PR-comment grammar.

    /minify [--models M [M ...]] [--backend B] [--mode M] [--dtype D]
            [--config KEY=VALUE [KEY=VALUE ...]] [--sha SHA]
    /minify help

`parse(body)` never raises on bad input: it returns None when the comment holds no command, or a
`SlashCommand` whose `kind` is "run", "help" or "invalid" (with a one-line `error` and the usage
text to reply with). Every value is checked against a strict pattern here, because the parsed
request crosses job boundaries (authorize job -> GPU job -> report job) and ends up in argv lists
and markdown; nothing from a comment ever reaches a shell.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from bot import safejson
from bot.records import Record
from bot.torch_adapter.config import PREFIXES

if TYPE_CHECKING:
    from bot.options import CheckOptions

PREFIX = "/minify"
REQUEST_SCHEMA = "minify-action/request/v1"
MAX_LINE = 2000
MAX_MODELS = 50
MAX_CONFIG = 20

BACKENDS = ("eager", "aot_eager", "aot_eager_decomp_partition", "inductor", "cudagraphs")
MODES = ("inference", "training")
DTYPES = ("float32", "float16", "bfloat16", "amp")
CONFIG_MODULES = PREFIXES   # the prefixes of torch's config modules (bot.torch_adapter.config)

MODEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}")
CONFIG_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
BACKEND_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,99}(?::[A-Za-z_][A-Za-z0-9_]{0,99})?")
DEVICE_RE = re.compile(r"(cpu|cuda|xpu|mps)(:\d{1,3})?")
REVISION_RE = re.compile(r"[0-9a-f]{40}")


def safe(value, rx: re.Pattern, fallback):
    """``value`` when it is a string matching ``rx`` exactly, else ``fallback`` (artifact fields)."""
    return value if isinstance(value, str) and rx.fullmatch(value) else fallback


CONFIG_VALUE_RE = re.compile(r"[A-Za-z0-9_.,:+\-]{0,200}")
SHA_RE = re.compile(r"[0-9a-f]{7,40}")

USAGE = f"""\
/minify [--models MODEL [MODEL ...]] [--backend BACKEND] [--mode MODE] [--dtype DTYPE]
        [--config KEY=VALUE [KEY=VALUE ...]] [--sha SHA]
/minify help

Runs the accuracy checks on this pull request's head commit, minifies every failure and
answers in one comment on this pull request. Needs write access to the repository.

  --models     model names (space- or comma-separated); default: the workflow's suite
  --backend    one of: {", ".join(BACKENDS)}
  --mode       one of: {", ".join(MODES)}
  --dtype      one of: {", ".join(DTYPES)}
  --config     torch config override, e.g. inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy
               (keys under: {", ".join(CONFIG_MODULES)}; repeatable)
  --sha        the head commit to test; it must be the pull request's current head. Pull
               requests from forks need the full 40 hex digits (others: at least 7).
               Without it, the head at authorization time is pinned, unless it moved
               after the comment was written.
"""


class _ParseError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # never print, never exit
        raise _ParseError(message)

    def exit(self, status=0, message=None):  # pragma: no cover - no action calls exit
        raise _ParseError(message or "invalid command")


def _model(value: str) -> list[str]:
    names = [v for v in value.split(",") if v]
    for name in names:
        if not MODEL_RE.fullmatch(name):
            raise argparse.ArgumentTypeError(f"invalid model name {name!r}")
    return names


def _config(value: str) -> tuple[str, str]:
    key, sep, val = value.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--config wants KEY=VALUE, got {value!r}")
    if not CONFIG_KEY_RE.fullmatch(key) or key.split(".")[0] not in CONFIG_MODULES:
        raise argparse.ArgumentTypeError(
            f"invalid config key {key!r} (a dotted name under {', '.join(CONFIG_MODULES)})")
    if not CONFIG_VALUE_RE.fullmatch(val):
        raise argparse.ArgumentTypeError(f"invalid value for {key}: only letters, digits and _ . , : + - are allowed")
    return key, val


def _sha(value: str) -> str:
    value = value.lower()
    if not SHA_RE.fullmatch(value):
        raise argparse.ArgumentTypeError(f"--sha wants 7 to 40 hex digits, got {value!r}")
    return value


def _build_parser() -> _Parser:
    p = _Parser(prog=PREFIX, add_help=False, allow_abbrev=False, exit_on_error=False)
    p.add_argument("words", nargs="*")
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument("--models", "--model", type=_model, nargs="+", action="extend", default=None)
    p.add_argument("--backend", choices=BACKENDS)
    p.add_argument("--mode", choices=MODES)
    p.add_argument("--dtype", choices=DTYPES)
    p.add_argument("--config", type=_config, nargs="+", action="extend", default=None)
    p.add_argument("--sha", type=_sha)
    return p


@dataclass(kw_only=True)
class RequestedSettings:
    """What a run asks for over the workflow's check options: models, backend, mode and dtype that
    replace the workflow's, and --config overrides that come after its own. A :class:`SlashCommand`
    parses them from a comment, a :class:`MinifyRequest` hands them on to the later jobs."""

    models: list[str] = field(default_factory=list)
    backend: str | None = None
    mode: str | None = None
    dtype: str | None = None
    config: dict[str, str] = field(default_factory=dict)

    def settings(self) -> dict:
        """The settings alone, copied: what a command hands its request, and a request its command."""
        return {"models": list(self.models), "backend": self.backend, "mode": self.mode, "dtype": self.dtype,
                "config": dict(self.config)}

    def check_options(self, base: "CheckOptions | None" = None) -> "CheckOptions":
        """The check options these settings ask for, over the workflow's ``base``: the models,
        backend, mode and dtype replace the workflow's; the config overrides come after its own."""
        import dataclasses

        from bot.options import CheckOptions

        base = base or CheckOptions()
        return dataclasses.replace(
            base, models=list(self.models) or list(base.models), backend=self.backend or base.backend,
            mode=self.mode or base.mode, dtype=self.dtype or base.dtype,
            config=[*base.config, *(f"{k}={v}" for k, v in self.config.items())])

    def check_args(self) -> list[str]:
        """The `minify-bot check` flags these settings ask for (an argv list, never shell text)."""
        from bot.options import to_argv

        return to_argv(self.check_options())

    def describe(self) -> str:
        parts = []
        if self.models:
            parts.append("models " + ", ".join(self.models))
        for label, value in (("backend", self.backend), ("mode", self.mode), ("dtype", self.dtype)):
            if value:
                parts.append(f"{label} {value}")
        for key, val in self.config.items():
            parts.append(f"{key}={val}")
        return "; ".join(parts) if parts else "the workflow's default settings"


@dataclass
class SlashCommand(RequestedSettings):
    """A parsed comment (:func:`parse`): a run with its settings and ``sha``, help, or an invalid
    command with its ``error``."""

    kind: str  # "run" | "help" | "invalid"
    line: str = ""
    sha: str | None = None
    error: str | None = None

    usage = USAGE


def _command_line(body: str) -> str | None:
    """The first line that starts with /minify, outside fenced code blocks and quotes."""
    fenced = False
    for raw in body.splitlines():
        line = raw.strip()
        if line.startswith("```") or line.startswith("~~~"):
            fenced = not fenced
            continue
        if fenced:
            continue
        if line == PREFIX or line.startswith(PREFIX + " ") or line.startswith(PREFIX + "\t"):
            return line
    return None


def parse(body: object) -> SlashCommand | None:
    """Parse a comment body. None: not a /minify command. Never raises."""
    if not isinstance(body, str):
        return None
    line = _command_line(body)
    if line is None:
        return None
    if len(line) > MAX_LINE:
        return SlashCommand("invalid", line=line[:MAX_LINE], error=f"the command is longer than {MAX_LINE} characters")
    try:
        tokens = shlex.split(line[len(PREFIX):], comments=False, posix=True)
    except ValueError as exc:
        return SlashCommand("invalid", line=line, error=f"cannot split the command: {exc}")
    try:
        ns = _build_parser().parse_args(tokens)
    except _ParseError as exc:
        return SlashCommand("invalid", line=line, error=str(exc))
    except (argparse.ArgumentError, ValueError, TypeError) as exc:
        return SlashCommand("invalid", line=line, error=str(exc))
    if ns.help or ns.words == ["help"]:
        if ns.words not in ([], ["help"]) or any(
                v for v in (ns.models, ns.backend, ns.mode, ns.dtype, ns.config, ns.sha)):
            return SlashCommand("invalid", line=line, error="`help` takes no other arguments")
        return SlashCommand("help", line=line)
    if ns.words:
        return SlashCommand("invalid", line=line, error=f"unexpected argument {ns.words[0]!r}")
    models = list(dict.fromkeys(m for group in ns.models or [] for m in group))
    if len(models) > MAX_MODELS:
        return SlashCommand("invalid", line=line, error=f"at most {MAX_MODELS} models per command")
    config: dict[str, str] = {}
    for key, val in ns.config or []:
        if key in config and config[key] != val:
            return SlashCommand("invalid", line=line, error=f"--config {key} given twice with different values")
        config[key] = val
    if len(config) > MAX_CONFIG:
        return SlashCommand("invalid", line=line, error=f"at most {MAX_CONFIG} --config overrides")
    return SlashCommand("run", line=line, models=models, backend=ns.backend, mode=ns.mode,
                        dtype=ns.dtype, config=config, sha=ns.sha)


# ---------------------------------------------------------------- the request handed between jobs


@dataclass
class MinifyRequest(RequestedSettings, Record):
    """A ``/minify`` request, as the authorize stage hands it to the check and report stages (the
    ``request`` step output, then their ``request`` input): what the command asks for (its
    settings), the pinned head commit and who asked where. Written by :meth:`to_text`, read back
    by :meth:`from_text`, which re-validates it: it came from an untrusted comment and crossed a
    job boundary."""

    sha: str
    pr: int
    requested_by: str
    comment_id: int | None = None
    schema: str = REQUEST_SCHEMA

    def to_text(self) -> str:
        """The step output's text (keys sorted: workflows may read it)."""
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def from_text(cls, text: str) -> "MinifyRequest":
        """Re-validate a request that crossed a job boundary; :class:`RequestError` says why not."""
        if len(text) > 64 * 1024:
            raise RequestError("the request is larger than 64 KiB")
        try:
            data = safejson.loads(text, max_depth=4)
        except ValueError as exc:
            raise RequestError(f"the request is not JSON: {exc}") from None
        _check_request(data)
        return cls.from_json({**data, "models": data.get("models") or [], "config": data.get("config") or {}})

    def command(self) -> SlashCommand:
        """The run command the request stands for (its settings, no comment line)."""
        return SlashCommand("run", sha=self.sha, **self.settings())


def to_request(cmd: SlashCommand, *, sha: str, pr: int, comment_id: int | None, requested_by: str) -> MinifyRequest:
    if cmd.kind != "run":
        raise ValueError("only a run command becomes a request")
    return MinifyRequest(sha=sha, pr=pr, comment_id=comment_id, requested_by=requested_by, **cmd.settings())


class RequestError(ValueError):
    pass


def _check_request(data: object) -> None:
    """Raise :class:`RequestError` unless ``data`` is a valid request's JSON (no unknown keys)."""
    if not isinstance(data, dict) or data.get("schema") != REQUEST_SCHEMA:
        raise RequestError(f"the request is not a {REQUEST_SCHEMA} object")
    extra = set(data) - {f.name for f in fields(MinifyRequest)}
    if extra:
        raise RequestError(f"unknown request fields: {', '.join(sorted(extra))}")
    _check_settings(data)
    sha = data.get("sha")
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{40}", sha):
        raise RequestError("the request has no full head SHA")
    if not isinstance(data.get("pr"), int) or isinstance(data["pr"], bool) or not 0 < data["pr"] < 2 ** 31:
        raise RequestError("the request has no pull request number")
    if data.get("comment_id") is not None and (not isinstance(data["comment_id"], int)
                                               or isinstance(data["comment_id"], bool)
                                               or not 0 < data["comment_id"] < 2 ** 63):
        raise RequestError("invalid comment id in the request")
    if (not isinstance(data.get("requested_by"), str)
            or not re.fullmatch(r"[A-Za-z0-9\[\]_.-]{1,64}", data["requested_by"])):
        raise RequestError("invalid requester in the request")


def _check_settings(data: dict) -> None:
    """The command's part of a request: models, backend, mode, dtype and config, as :func:`parse` allows."""
    models = data.get("models") or []
    if not isinstance(models, list) or len(models) > MAX_MODELS or not all(
            isinstance(m, str) and MODEL_RE.fullmatch(m) for m in models):
        raise RequestError("invalid models in the request")
    for key, choices in (("backend", BACKENDS), ("mode", MODES), ("dtype", DTYPES)):
        if data.get(key) is not None and data.get(key) not in choices:
            raise RequestError(f"invalid {key} in the request")
    config = data.get("config") or {}
    if not isinstance(config, dict) or len(config) > MAX_CONFIG:
        raise RequestError("invalid config in the request")
    for key, val in config.items():
        try:
            _config(f"{key}={val}" if isinstance(val, str) else "")
        except argparse.ArgumentTypeError as exc:
            raise RequestError(str(exc)) from None

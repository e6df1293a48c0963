"""GitHub Actions runner glue: inputs, outputs, step summary, annotations, masks, event payloads.

Everything the runner hands us (inputs, event payload, file-command paths) is read here, and
everything we hand back (outputs, summary, workflow commands) is written here, so the rest of the
bot never formats a workflow command by hand.

References: the runner's `ActionCommand` escaping tables, the `GITHUB_OUTPUT` heredoc form
(`name<<DELIMITER`), the 1 MiB per-step summary limit.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import uuid
from dataclasses import dataclass
from typing import Iterator, Mapping, TextIO

from bot import safejson
from bot.errors import UsageError
from bot.proc import SHARED_ENV as SHARED_FORKSERVERS

SUMMARY_LIMIT = 1024 * 1024  # bytes per step; over that the upload fails
SUMMARY_TRUNCATED = ("\n\n> **Summary truncated**: the step summary is limited to 1 MiB; "
                     "the full results are in the run directory artifact.\n")

TRUE_WORDS = {"true", "yes", "1", "on"}
FALSE_WORDS = {"false", "no", "0", "off", ""}


# ---------------------------------------------------------------- inputs


def input_env_names(name: str) -> list[str]:
    """Environment names an input may arrive under.

    The runner names a Docker/JS action input `INPUT_<NAME>` with spaces turned into underscores
    and hyphens KEPT (`dry-run` -> `INPUT_DRY-RUN`). POSIX shells cannot set such names, so our
    composite action passes `INPUT_DRY_RUN`; both are accepted, the runner's spelling first.
    """
    exact = "INPUT_" + name.replace(" ", "_").upper()
    names = [exact]
    alt = exact.replace("-", "_")
    if alt != exact:
        names.append(alt)
    return names


def get_input(name: str, default: str = "", env: Mapping[str, str] | None = None, *,
              multiline: bool = False) -> str:
    """An input's value, stripped. Single-line inputs (the default) reject line breaks: a value
    with one could smuggle a workflow command (`::error ...`) into a line the log echoes."""
    env = os.environ if env is None else env
    for key in input_env_names(name):
        if key in env:
            value = env[key].strip()
            if not multiline and any(c in value for c in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"):
                raise UsageError(f"input {name!r} must be a single line; it contains a line break")
            return value
    return default


def get_bool_input(name: str, default: bool, env: Mapping[str, str] | None = None) -> bool:
    raw = get_input(name, "", env)
    if raw == "":
        return default
    low = raw.lower()
    if low in TRUE_WORDS:
        return True
    if low in FALSE_WORDS:
        return False
    raise UsageError(f"input {name!r} must be true or false, got {raw!r}")


def get_int_input(name: str, default: int | None, env: Mapping[str, str] | None = None,
                  minimum: int | None = None) -> int | None:
    raw = get_input(name, "", env)
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise UsageError(f"input {name!r} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise UsageError(f"input {name!r} must be at least {minimum}, got {value}")
    return value


def get_list_input(name: str, env: Mapping[str, str] | None = None) -> list[str]:
    """A list input: items separated by newlines and/or commas, blanks dropped."""
    raw = get_input(name, "", env, multiline=True)
    return [item.strip() for item in re.split(r"[\r\n,]", raw) if item.strip()]


def get_lines_input(name: str, env: Mapping[str, str] | None = None) -> list[str]:
    """A list input whose items may contain commas (e.g. config overrides): one item per line."""
    raw = get_input(name, "", env, multiline=True)
    return [line.strip() for line in raw.splitlines() if line.strip()]


# ---------------------------------------------------------------- escaping


def escape_data(value: str) -> str:
    """Escape a workflow-command message (the part after `::`)."""
    return str(value).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """Escape a workflow-command property value (file=, title=, ...)."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>])")


BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
ZWSP = "\u200b"
# what GitHub turns into a link without any markup (GFM's extended autolinks): broken after the scheme
_AUTOLINK_RX = re.compile(r"(?i)(?<![A-Za-z0-9])(?:https?|ftp|mailto|xmpp)(?=:)|(?<![A-Za-z0-9])www(?=\.)")
_MENTION_RX = re.compile(r"@(?=[A-Za-z0-9_-])")
_REF_RX = re.compile(r"#(?=\d)")
_COMMENT_RX = re.compile(r"<!--|-->|<(?=!)")


def break_comments(text: str) -> str:
    """Break HTML-comment delimiters (so no text can open, close or forge a marker)."""
    return _COMMENT_RX.sub(lambda m: m.group(0)[0] + ZWSP + m.group(0)[1:], text)


def neutralize(text: str, *, bare_links: bool = True) -> str:
    """Break @mentions, #123 references, bare URLs (GitHub links ``https://…``, ``http://…`` and
    ``www.…`` by themselves, and ``mailto:``/``xmpp:`` addresses) and HTML-comment delimiters with a
    zero-width space; drop
    bidirectional controls (a right-to-left override makes text read as something it is not). A
    backslash alone does not stop GitHub from linking ``\\#3`` to issue 3; the zero-width space does.
    The one definition for the issue bodies (bot/render.py) and the Action's summary (md_escape)."""
    text = break_comments(BIDI_CONTROLS.sub("", text))
    if bare_links:   # inside a code span or block GitHub links nothing: a URL there stays copyable
        text = _AUTOLINK_RX.sub(lambda m: m.group(0) + ZWSP, text)
    text = _MENTION_RX.sub("@" + ZWSP, text)
    return _REF_RX.sub("#" + ZWSP, text)


def md_escape(text: object, limit: int | None = 200) -> str:
    """Make untrusted text inert in GitHub-flavoured markdown, on one line (safe in table cells).

    HTML is entity-escaped, markdown punctuation backslash-escaped, `@mentions` and `#refs`
    defused the way the issue bodies' are (``neutralize``), newlines flattened. Long text is cut to
    `limit` characters.
    """
    s = BIDI_CONTROLS.sub("", str(text))  # no right-to-left overrides that make text read as something else
    s = re.sub(r"[\r\n\x85\u2028\u2029]", " ", s)
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "…"
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_SPECIAL.sub(r"\\\1", s)
    return neutralize(s)  # no pings, no issue references


def md_code(text: object, limit: int | None = 200) -> str:
    """Untrusted text as inline code: no markdown inside, backticks neutralised."""
    s = str(text).replace("\r", " ").replace("\n", " ")
    if limit is not None and len(s) > limit:
        s = s[: limit - 1] + "…"
    s = s.replace("`", "'")
    s = s.replace("|", "\\|")
    return f"`{s}`" if s else "` `"


# ---------------------------------------------------------------- workflow commands


class Commands:
    """Writes workflow commands to a stream (stdout in a runner)."""

    def __init__(self, stream: TextIO | None = None):
        self._stream = stream

    @property
    def stream(self) -> TextIO:
        return self._stream or sys.stdout

    def _cmd(self, command: str, message: str = "", **props: object) -> None:
        items = [f"{k}={escape_property(str(v))}" for k, v in props.items() if v is not None and v != ""]
        head = f"::{command}"
        if items:
            head += " " + ",".join(items)
        print(f"{head}::{escape_data(message)}", file=self.stream, flush=True)

    def error(self, message: str, *, title: str | None = None, file: str | None = None,
              line: int | None = None) -> None:
        self._cmd("error", message, title=title, file=file, line=line)

    def warning(self, message: str, *, title: str | None = None, file: str | None = None,
                line: int | None = None) -> None:
        self._cmd("warning", message, title=title, file=file, line=line)

    def notice(self, message: str, *, title: str | None = None) -> None:
        self._cmd("notice", message, title=title)

    def debug(self, message: str) -> None:
        self._cmd("debug", message)

    def add_mask(self, value: str | None) -> None:
        """Mask a secret in the log; every line separately (the runner masks per line). Values
        shorter than MIN_SECRET_LENGTH are not masked: masking `1` or `true` would turn outputs and
        half the log into `***`."""
        if not value:
            return
        for line in str(value).splitlines():
            line = line.strip()
            if is_maskable(line):
                self._cmd("add-mask", line)

    @contextlib.contextmanager
    def group(self, title: str) -> Iterator[None]:
        print(f"::group::{escape_data(title)}", file=self.stream, flush=True)
        try:
            yield
        finally:
            print("::endgroup::", file=self.stream, flush=True)

    @contextlib.contextmanager
    def untrusted(self) -> Iterator[None]:
        """Stop command processing while untrusted text is echoed (a random resume token)."""
        token = "minify-" + uuid.uuid4().hex
        print(f"::stop-commands::{token}", file=self.stream, flush=True)
        try:
            yield
        finally:
            print(f"::{token}::", file=self.stream, flush=True)


# ---------------------------------------------------------------- secrets

_SECRET_PATTERNS = [
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"),  # GitHub tokens
    re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}\b"),
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key ids
    re.compile(r"\b(?:xox[abpr]-[A-Za-z0-9-]{10,})\b"),  # Slack
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    re.compile(r"\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"),  # OpenAI / Anthropic style API keys
    re.compile(r"\bhf_[A-Za-z0-9]{20,}\b"),  # Hugging Face
    re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}\b"),  # GitLab
    re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]{3,}@"),  # a URL with a password (PIP_INDEX_URL, ...)
    re.compile(r'"auth"\s*:\s*"[A-Za-z0-9+/=]{8,}"'),  # docker's config.json credentials
]
_SECRET_WORD = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PRIVATE_KEY|API_KEY|SIGNING_KEY|ACCESS_KEY|"
                          r"CREDENTIAL)", re.I)
# Names that hold a secret word but not a secret: where a cache, a config file or a directory is
# (TIKTOKEN_CACHE_DIR, HF_TOKEN_PATH, DOCKER_PASSWORD_FILE), and the words that only contain one
# (a tokenizer's TOKENIZERS_PARALLELISM, tiktoken's TIKTOKEN_*). Their values are still checked.
_LOCATION_NAME = re.compile(r"_(?:CACHE|CACHE_DIR|DIR|DIRS|PATH|FILE|HOME|ROOT)$", re.I)
_NOT_SECRET_WORDS = re.compile(r"TIKTOKEN|TOKENIZERS?|TOKENIZATION|DETOKENIZ\w*", re.I)


def secret_name(name: str) -> bool:
    """Whether a variable's name says it holds a credential: it names one (TOKEN, SECRET, PASSWORD,
    PASSWD, PASSPHRASE, PRIVATE_KEY, API_KEY, SIGNING_KEY, ACCESS_KEY, CREDENTIAL, in any case) other
    than inside a tokenizer's name, and it does not name where a file, directory or cache is (a name
    ending in _CACHE, _CACHE_DIR, _DIR, _DIRS, _PATH, _FILE, _HOME, _ROOT)."""
    if _LOCATION_NAME.search(name):
        return False
    return bool(_SECRET_WORD.search(_NOT_SECRET_WORDS.sub("", name)))



MIN_SECRET_LENGTH = 8


def is_maskable(value: str | None) -> bool:
    """Long enough to be a secret worth masking (and redacting)."""
    return bool(value) and len(str(value).strip()) >= MIN_SECRET_LENGTH


def find_secrets(text: str) -> list[str]:
    found: list[str] = []
    for pat in _SECRET_PATTERNS:
        found.extend(m.group(0) for m in pat.finditer(text))
    return found


def secret_like_env(env: Mapping[str, str]) -> dict[str, str]:
    """Environment entries that hold a secret: by name (TOKEN, SECRET, ...) or by value (a GitHub
    token's ghp_/gho_/ghu_/ghs_/ghr_/github_pat_ form, other known key formats), whatever the name."""
    return {k: v for k, v in env.items() if v and (secret_name(k) or find_secrets(v))}


def scrubbed_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of env without secret-like variables: what untrusted child processes get."""
    keep = {}
    for k, v in env.items():
        if secret_name(k) or k.startswith("ACTIONS_"):
            continue
        if find_secrets(v):
            continue
        keep[k] = v
    return keep


# The runner's file commands: whoever writes them sets the job's environment and PATH for later
# steps, its outputs, its saved state and its summary. Only the Action's own process writes them.
FILE_COMMANDS = ("GITHUB_ENV", "GITHUB_PATH", "GITHUB_STATE", "GITHUB_OUTPUT", "GITHUB_STEP_SUMMARY")


def stage_env(env: Mapping[str, str], extra: dict | None = None) -> dict[str, str]:
    """The environment of a stage's process (the Action's, and `run`'s when it holds a secret): no
    credential (by name or by value), none of the runner's file commands; plus ``extra`` (what the
    stage is given on purpose). Nor a directory of shared fork servers (bot.proc.SHARED_ENV), nor any
    variable of that family (its name as a prefix): a stage's processes end with it, and what a server
    outside it forked would escape that end."""
    out = {k: v for k, v in scrubbed_env(env).items()
           if k not in FILE_COMMANDS and not k.startswith(SHARED_FORKSERVERS)}
    out["PYTHONUNBUFFERED"] = "1"
    out.update(extra or {})
    return out


def redact(text: str, secrets: list[str]) -> str:
    for s in sorted({s for s in secrets if is_maskable(s)}, key=len, reverse=True):
        text = text.replace(s, "***")
    for pat in _SECRET_PATTERNS:
        text = pat.sub("***", text)
    return text


# ---------------------------------------------------------------- outputs and summary


def _random_delimiter(value: str) -> str:
    while True:
        delim = f"ghadelimiter_{uuid.uuid4()}"
        if delim not in value:
            return delim


def format_output(name: str, value: object) -> str:
    """One GITHUB_OUTPUT entry in heredoc form with a fresh random delimiter."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", name):
        raise ValueError(f"bad output name {name!r}")
    text = value if isinstance(value, str) else json.dumps(value)
    delim = _random_delimiter(text)
    return f"{name}<<{delim}\n{text}\n{delim}\n"


def set_output(name: str, value: object, env: Mapping[str, str] | None = None) -> bool:
    """Append an output; returns False when not running under a runner (no GITHUB_OUTPUT)."""
    env = os.environ if env is None else env
    path = env.get("GITHUB_OUTPUT")
    if not path:
        return False
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(format_output(name, value))
    return True


def append_summary(markdown: str, env: Mapping[str, str] | None = None,
                   limit: int = SUMMARY_LIMIT) -> bool:
    """Append to the step summary, never letting the file exceed `limit` bytes.

    Returns False when there is no GITHUB_STEP_SUMMARY. Over budget, the text is cut at a line
    boundary and a note says so.
    """
    env = os.environ if env is None else env
    path = env.get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    try:
        used = os.path.getsize(path)
    except OSError:
        used = 0
    if used >= len(SUMMARY_TRUNCATED):
        with open(path, "rb") as fh:
            fh.seek(used - len(SUMMARY_TRUNCATED.encode("utf-8")))
            if fh.read() == SUMMARY_TRUNCATED.encode("utf-8"):
                return True  # already cut: later text would land after the note
    data = markdown.encode("utf-8")
    room = limit - used
    if len(data) > room:
        note = SUMMARY_TRUNCATED.encode("utf-8")
        budget = max(0, room - len(note))
        cut = data[:budget]
        nl = cut.rfind(b"\n")
        if nl > 0:
            cut = cut[:nl]
        cut = cut.decode("utf-8", errors="ignore").encode("utf-8")
        data = cut + note if room >= len(note) else b""
    if data:
        with open(path, "ab") as fh:
            fh.write(data)
    return True


# ---------------------------------------------------------------- event


@dataclass
class Event:
    name: str
    payload: dict

    def obj(self, *keys: str) -> dict:
        """payload[k1][k2]... when every step is an object, else {} (payloads are untrusted)."""
        cur: object = self.payload
        for k in keys:
            cur = cur.get(k) if isinstance(cur, dict) else None
        return cur if isinstance(cur, dict) else {}

    @property
    def comment_body(self) -> str:
        body = self.obj("comment").get("body")
        return body if isinstance(body, str) else ""

    @property
    def is_pr_comment(self) -> bool:
        return self.name == "issue_comment" and bool(self.obj("issue").get("pull_request"))


def read_event(env: Mapping[str, str] | None = None) -> Event:
    """Read GITHUB_EVENT_NAME and the payload at GITHUB_EVENT_PATH (exit 2 when malformed)."""
    env = os.environ if env is None else env
    name = env.get("GITHUB_EVENT_NAME", "").strip()
    if not name:
        raise UsageError("GITHUB_EVENT_NAME is not set: `minify-bot action` must run in a workflow (or set it by hand)")
    if not re.fullmatch(r"[a-z_]{1,64}", name):
        raise UsageError(f"GITHUB_EVENT_NAME {name[:80]!r} is not an event name")
    path = env.get("GITHUB_EVENT_PATH", "").strip()
    if not path:
        if name in ("schedule", "workflow_dispatch"):
            return Event(name, {})
        raise UsageError(f"GITHUB_EVENT_PATH is not set for a {name} event")
    try:
        with open(path, "rb") as fh:
            raw = fh.read(32 * 1024 * 1024 + 1)
    except OSError as exc:
        raise UsageError(f"cannot read the event payload {path}: {exc.strerror}") from None
    if len(raw) > 32 * 1024 * 1024:
        raise UsageError("the event payload is larger than 32 MiB")
    try:
        payload = safejson.loads(raw)
    except ValueError as exc:
        raise UsageError(f"the event payload {path} is not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise UsageError(f"the event payload {path} is not a JSON object")
    return Event(name, payload)


def repository(env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    repo = env.get("GITHUB_REPOSITORY", "").strip()
    if not re.fullmatch(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+", repo):
        raise UsageError(f"GITHUB_REPOSITORY must be owner/name, got {repo!r}")
    return repo


def run_url(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    server, repo, run_id = env.get("GITHUB_SERVER_URL"), env.get("GITHUB_REPOSITORY"), env.get("GITHUB_RUN_ID")
    if server and repo and run_id:
        return f"{server.rstrip('/')}/{repo}/actions/runs/{run_id}"
    return None

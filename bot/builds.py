"""Builds: the ways to get a torch that a repro (or the whole bot) can run under.

A build is one of

- a pip requirement: ``torch==2.15.0``; a nightly ``torch==2.16.0.dev20261120`` with the nightly
  index (``torch==2.16.0.dev20261120 @ https://download.pytorch.org/whl/nightly/cpu``);
- an existing interpreter (``python:/usr/bin/python3.11``) or virtual environment (``venv:/opt/t213``);
- a container image on the runner (``image:ghcr.io/org/torch:2.15``), run with docker.

A pip build gets a virtual environment of its own under the cache directory, created once (with
``uv`` where it is installed, else ``python -m venv`` and pip) and reused by every later run once it
checks out (:meth:`BuildCache.verify`); the environment minify-bot itself runs in is never touched.
A build's index *replaces* the default index (``--index-url``, never ``--extra-index-url``): every
package of the build comes from it, so a higher version of the same name on another index cannot win.
Each build may carry environment variables of its own (a YAML builds file: ``env:``), set in every
process that runs under it.

Command line (``--build`` items, oldest first) or a YAML file, a list of::

    - name: "2.15.0"           # what issues call it (default: the spec)
      pip: torch==2.15.0       # or python: PATH, venv: DIR, image: NAME
      index_url: https://...   # pip only: the one index everything is installed from
      packages: ["numpy<3"]    # pip only: more requirements for the same venv
      env: {TORCHINDUCTOR_FREEZING: "1"}

Every entry is checked before anything runs (:func:`parse_build`, :func:`build_from_json`; a
:class:`UsageError` names the entry and what is wrong): requirements are PEP 508 strings without a
URL or a leading ``-``, an index is ``https://host/...`` without credentials, paths are absolute, an
image is a docker reference.
"""

from __future__ import annotations

import base64
import contextlib
import csv
import hashlib
import json
import os
import re
import secrets
import shutil
import stat
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

from bot import proc, safejson
from bot.errors import InfraError, UsageError
from bot.records import Record, ResultsDoc

KINDS = ("pip", "python", "venv", "image")
INSTALL_TIMEOUT = 1800.0  # a CUDA wheel and its libraries: a few GB
PROBE_TIMEOUT = 300.0
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_PROJECT_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")   # PEP 508's name
_HOST = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*|[0-9a-f:.]+")
_PATH_PART = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
# a docker image reference: [registry[:port]/]name[/name...][:tag][@sha256:<64 hex>], lowercase names;
# a first component is a registry only when it has a dot or a port, or is localhost (as docker reads it)
_IMAGE = re.compile(
    r"(?:(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)+(?::[0-9]{1,5})?"
    r"|localhost(?::[0-9]{1,5})?|[a-z0-9](?:[a-z0-9-]*[a-z0-9])?:[0-9]{1,5})/)?"
    rf"{_PATH_PART}(?:/{_PATH_PART})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?(?:@sha256:[0-9a-f]{{64}})?")
MAX_NAME = 128
MAX_REQUIREMENT = 256
MAX_URL = 512
MAX_PATH = 1024
MAX_IMAGE = 255
MAX_ENV_VALUE = 32_768


# ---------------------------------------------------------------------------- what an entry may say

def _requirement_problem(text: object) -> str | None:
    """Why ``text`` is not a requirement a build may hand pip (None when it is): a PEP 508 string
    (parsed by ``packaging``) naming a project, with versions, extras and markers but no URL, and
    nothing pip would read as an option, a file or a VCS checkout."""
    if not isinstance(text, str):
        return "not a string"
    if not text or text != text.strip() or len(text) > MAX_REQUIREMENT or not text.isprintable():
        return f"not a requirement (empty, padded, over {MAX_REQUIREMENT} characters or not printable)"
    if text.startswith("-"):
        return "starts with '-': pip would read an option (-r FILE, -e DIR, --trusted-host ...), not a requirement"
    Requirement, InvalidRequirement = _packaging()
    try:
        req = Requirement(text)
    except InvalidRequirement as exc:
        return f"not a PEP 508 requirement like torch==2.15.0 ({str(exc).splitlines()[0][:160]})"
    if req.url:
        return "a direct URL reference (NAME @ URL) is not allowed: name the index it comes from instead"
    if not _PROJECT_NAME.fullmatch(req.name):
        return f"{req.name!r} is not a project name"
    return None


def _packaging():
    """``packaging``'s Requirement and InvalidRequirement: the standalone package where it is
    installed, else the copy pip carries (minify-bot does not depend on packaging itself)."""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:
        try:
            from pip._vendor.packaging.requirements import InvalidRequirement, Requirement
        except ImportError as exc:
            raise InfraError("checking a pip build needs the 'packaging' package (or pip)") from exc
    return Requirement, InvalidRequirement


def _index_problem(url: object, schemes: tuple[str, ...] = ("https",)) -> str | None:
    """Why ``url`` is not an index a build may name (None when it is): ``https://host[:port]/...``
    (``schemes``), no credentials (they would be written to logs and the cache key), no whitespace."""
    if not isinstance(url, str):
        return "not a string"
    if not url or len(url) > MAX_URL or not url.isprintable() or any(c.isspace() for c in url):
        return f"not a URL (empty, over {MAX_URL} characters, or whitespace or control characters in it)"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (a port that is not a number raises)
    except ValueError as exc:
        return f"not a URL ({exc})"
    if parts.scheme not in schemes:
        return f"an index must be {' or '.join(s + '://' for s in schemes)} (not {parts.scheme or 'a bare path'}:)"
    if "@" in parts.netloc:
        return ("credentials in an index URL (user:password@) would be written to logs and the cache key: "
                "give them to pip through netrc or a keyring")
    if parts.scheme == "file":
        return None if not parts.netloc and parts.path.startswith("/") else "a file: index must be file:///ABSOLUTE/PATH"
    if not parts.hostname or not _HOST.fullmatch(parts.hostname) or parts.fragment:
        return "not an https://HOST/PATH URL"
    return None


def _path_problem(path: object) -> str | None:
    if not isinstance(path, str):
        return "not a string"
    if not path.startswith("/") or len(path) > MAX_PATH or not path.isprintable():
        return f"not an absolute path (/...), or over {MAX_PATH} characters, or not printable"
    return None


def _image_problem(ref: object) -> str | None:
    if not isinstance(ref, str):
        return "not a string"
    if len(ref) > MAX_IMAGE or not _IMAGE.fullmatch(ref):
        return ("not a docker image reference [REGISTRY[:PORT]/]NAME[:TAG][@sha256:DIGEST] "
                "(lowercase names, no spaces, nothing that starts with '-')")
    return None


def _env_problem(env: tuple) -> str | None:
    for k, v in env:
        if not isinstance(k, str) or not _ENV_NAME.fullmatch(k):
            return f"env: {k!r} is not an environment variable name"
        if not isinstance(v, str) or "\0" in v or len(v) > MAX_ENV_VALUE:
            return (f"env: {k}'s value must be a string (quote it in YAML) without NUL, "
                    f"at most {MAX_ENV_VALUE} characters")
    return None


def _name_problem(name: object) -> str | None:
    if not isinstance(name, str) or len(name) > MAX_NAME or not name.isprintable() or name != name.strip():
        return f"name {name!r}: a build's name is printable text of at most {MAX_NAME} characters"
    return None


_TARGET_PROBLEM = {"pip": _requirement_problem, "python": _path_problem, "venv": _path_problem,
                   "image": _image_problem}


@dataclass(frozen=True)
class Build:
    """One way to get a torch. ``target``: the requirement, interpreter, venv directory or image.

    Made here, every field is checked (a :class:`UsageError` says which and why); an index may be
    ``file:`` as well as https (a local index made by code, such as a test's): entries a user writes
    go through :func:`parse_build` or :func:`build_from_json`, which take https only. ``editable``:
    local project directories installed with ``pip install -e`` into a pip build (code only: no
    builds file or ``--build`` item can name one)."""

    kind: str
    target: str
    name: str = ""
    index_url: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    packages: tuple[str, ...] = ()  # more pip requirements for a pip build's venv
    editable: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in KINDS:
            raise UsageError(f"build kind {self.kind!r}: expected one of {', '.join(KINDS)}")
        problem = self.problem()
        if problem:
            raise UsageError(problem)
        if not self.name:
            name = self.target.split("==", 1)[1].strip() if self.target.startswith("torch==") else self.target
            object.__setattr__(self, "name", name if self.kind == "pip" else f"{self.kind}:{self.target}")

    def problem(self) -> str | None:
        """What is wrong with the build, naming the field (None when nothing is)."""
        why = _TARGET_PROBLEM[self.kind](self.target)
        if why:
            return f"{self.kind} {self.target!r}: {why}"
        if self.kind != "pip" and (self.index_url or self.packages or self.editable):
            return f"{self.kind} {self.target!r}: index_url, packages and editable are for pip builds only"
        if not isinstance(self.packages, tuple) or not isinstance(self.editable, tuple):
            return "packages and editable are tuples of strings"
        for p in self.packages:
            why = _requirement_problem(p)
            if why:
                return f"packages item {p!r}: {why}" + (" (an editable install: Build(editable=...))"
                                                          if p == "-e" else "")
        for d in self.editable:
            why = _path_problem(d)
            if why:
                return f"editable {d!r}: {why}"
        if self.index_url is not None:
            why = _index_problem(self.index_url, ("https", "file"))
            if why:
                return f"index_url {self.index_url!r}: {why}"
        return _env_problem(self.env) or (_name_problem(self.name) if self.name else None)

    @property
    def label(self) -> str:
        return self.name

    def to_json(self) -> dict:
        d = {"name": self.name, self.kind: self.target}
        if self.index_url:
            d["index_url"] = self.index_url
        if self.packages:
            d["packages"] = list(self.packages)
        if self.editable:
            d["editable"] = list(self.editable)
        if self.env:
            d["env"] = dict(self.env)
        return d


def _user_build(where: str, *args, **kw) -> Build:
    """A build from what a user wrote (``where`` names the entry in every error): checked as
    :class:`Build` checks, and its index https only."""
    try:
        build = Build(*args, **kw)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    why = build.index_url is not None and _index_problem(build.index_url)
    if why:
        raise UsageError(f"{where}: index_url {build.index_url!r}: {why}")
    return build


def parse_build(text: str) -> Build:
    """One ``--build`` item: ``torch==2.15.0``, ``torch==X @ INDEX_URL``, ``python:PATH``,
    ``venv:DIR`` or ``image:NAME``; ``NAME=`` in front names it (``nightly-1120=torch==...``)."""
    text = text.strip()
    where = f"build {text!r}"
    name = ""
    head, eq, rest = text.partition("=")
    if eq and re.fullmatch(r"[A-Za-z0-9_.+-]{1,64}", head) and rest.startswith(("torch", *(k + ":" for k in KINDS))):
        name, text = head, rest.strip()
    for kind in ("python", "venv", "image"):
        if text.startswith(kind + ":"):
            return _user_build(where, kind, text[len(kind) + 1:].strip(), name)
    req, at, index = text.partition("@")
    req = req.strip()
    if not req.startswith("torch"):
        raise UsageError(f"{where}: expected torch==VERSION [@ INDEX_URL], python:PATH, venv:DIR or image:NAME")
    if at and not index.strip():
        raise UsageError(f"{where}: '@' names an index: torch==VERSION @ https://...")
    return _user_build(where, "pip", req, name, index.strip() or None)


def build_from_json(d: object, where: str = "builds file") -> Build:
    """One build of a builds file, every field checked (a :class:`UsageError` naming ``where``)."""
    if not isinstance(d, dict):
        raise UsageError(f"{where}: each build is a mapping (name, pip|python|venv|image, index_url, packages, env)")
    kinds = [k for k in KINDS if k in d]
    if len(kinds) != 1:
        raise UsageError(f"{where}: each build needs exactly one of {', '.join(KINDS)}, got {sorted(map(str, d))}")
    unknown = set(d) - set(KINDS) - {"name", "index_url", "env", "packages"}
    if unknown:
        raise UsageError(f"{where}: unknown keys {sorted(map(str, unknown))}")
    env = d.get("env") or {}
    if not isinstance(env, dict):
        raise UsageError(f"{where}: env must be a mapping of names to strings")
    packages = d.get("packages") or []
    if not isinstance(packages, list):
        raise UsageError(f"{where}: packages must be a list of requirements, got {packages!r}")
    for key in (kinds[0], "name", "index_url"):
        if d.get(key) is not None and not isinstance(d[key], str):
            raise UsageError(f"{where}: {key} must be a string (quote it in YAML), got {d[key]!r}")
    return _user_build(where, kinds[0], d[kinds[0]], d.get("name") or "", d.get("index_url"),
                       tuple(env.items()), tuple(packages))


def load_builds(path: str) -> list[Build]:
    """The builds of a YAML (or JSON) file, in order."""
    import yaml

    try:
        with open(path, encoding="utf-8") as fh:
            doc = yaml.safe_load(fh)
    except OSError as exc:
        raise UsageError(f"builds file {path}: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        raise UsageError(f"builds file {path}: not valid YAML ({exc})") from exc
    if isinstance(doc, dict):
        doc = doc.get("builds")
    if not isinstance(doc, list) or not doc:
        raise UsageError(f"builds file {path}: expected a list of builds")
    return [build_from_json(d, f"{path}: build {i + 1}") for i, d in enumerate(doc)]


def default_cache_dir() -> Path:
    root = os.environ.get("MINIFY_BOT_BUILDS_DIR")
    if root:
        return Path(root)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "minify-bot" / "builds"


@dataclass
class Prepared:
    """A build ready to run: the command that starts its Python (``prefix + [script, ...]``) and
    the environment variables it adds."""

    build: Build
    prefix: list[str]
    env: dict = field(default_factory=dict)
    mounts: list[str] = field(default_factory=list)  # image builds: directories the container sees

    def command(self, args: list[str], cwd: str | None = None) -> list[str]:
        """The command that runs ``python ARGS`` in the build. An image build's: ``docker run`` with
        every option first (each value its own argument) and then the image, a checked reference
        that cannot start with '-' (``docker run`` takes no ``--``), then the container's command."""
        if self.build.kind != "image":
            return [*self.prefix, *args]
        docker = self.prefix[0]
        cmd = [docker, "run", "--rm", "--network", "none"]
        files = [os.path.dirname(a) for a in args if os.path.isabs(a) and os.path.exists(a)]  # the repro's folder
        for m in dict.fromkeys(self.mounts + files + ([cwd] if cwd else [])):
            if ":" in m or "," in m or not os.path.isabs(m):
                raise InfraError(f"build {self.build.label}: cannot mount {m!r} in a container (a ':' or ',' in it)")
            cmd += ["-v", f"{m}:{m}"]
        if cwd:
            cmd += ["-w", cwd]
        for k, v in self.env.items():
            cmd += ["-e", f"{k}={v}"]
        image = self.build.target
        if _image_problem(image):
            raise InfraError(f"build {self.build.label}: {image!r} is not an image reference")
        return [*cmd, image, "python", *args]


def _probed(expression: str) -> dict:
    """Field metadata: the Python expression the probe prints for the field (``torch`` imported,
    ``v`` = ``torch.version``)."""
    return {"probe": expression}


@dataclass
class BuildProbe(Record):
    """What a build's torch says about itself: the ``@@build {json}`` line :data:`PROBE_CODE`
    prints in a process of the build (an interpreter where minify-bot need not be importable, so
    the probe is plain code, written from these fields) and :meth:`read` parses here."""

    MARK: ClassVar[str] = "@@build "

    torch: str | None = field(default=None, metadata=_probed("torch.__version__"))
    git: str | None = field(default=None, metadata=_probed("getattr(v, 'git_version', None)"))
    cuda: str | None = field(default=None, metadata=_probed("getattr(v, 'cuda', None)"))

    @classmethod
    def code(cls) -> str:
        """The probe program: prints one ``@@build`` line with every field."""
        doc = ", ".join(f"{f.name!r}: {f.metadata['probe']}" for f in fields(BuildProbe))
        return f"import json, torch; v = torch.version; print({cls.MARK!r} + json.dumps({{{doc}}}))"

    @classmethod
    def from_json(cls, doc):
        """A value that is not a string is not known (None): the probing process is the build's."""
        if isinstance(doc, dict):
            doc = {k: v if isinstance(v, str) else None for k, v in doc.items()}
        return super().from_json(doc)

    @classmethod
    def read(cls, output: str) -> "BuildProbe | None":
        """The first well-formed ``@@build`` line of a probe's output; None when it printed none."""
        for line in output.splitlines():
            if line.startswith(cls.MARK):
                with contextlib.suppress(ValueError):
                    doc = safejson.loads(line[len(cls.MARK):])  # printed by a process of the build: bounded
                    if isinstance(doc, dict):
                        return BuildProbe.from_json(doc)
        return None


PROBE_CODE = BuildProbe.code()


@dataclass
class Info(BuildProbe):
    """What a build's torch says about itself (:class:`BuildProbe`), or why it cannot run (``error``)."""

    error: str | None = None



# pip/uv settings a build with an index keeps from the environment (how to reach an index, not which)
_TRANSPORT_VARS = frozenset({"PIP_CERT", "PIP_CLIENT_CERT", "PIP_DEFAULT_TIMEOUT", "PIP_TIMEOUT", "PIP_RETRIES",
                             "PIP_PROXY", "PIP_CACHE_DIR", "PIP_NO_CACHE_DIR", "PIP_DISABLE_PIP_VERSION_CHECK",
                             "PIP_PROGRESS_BAR", "UV_CACHE_DIR", "UV_NO_CACHE", "UV_HTTP_TIMEOUT", "UV_NATIVE_TLS",
                             "UV_CONCURRENT_DOWNLOADS"})
MANIFEST_SUFFIX = ".manifest.json"
MAX_MANIFEST = 4 << 20


def install_env(build: Build, environ: dict | None = None) -> dict:
    """The environment a pip build is installed in: no pip configuration file is read
    (``PIP_CONFIG_FILE`` is the null device; uv gets ``--no-config``): a file any process of this
    user may write must not add an index. A build with an index also drops every ``PIP_*`` and
    ``UV_*`` variable but those of :data:`_TRANSPORT_VARS` (certificates, proxy, timeouts, caches),
    so that its index is the only one (no ``PIP_EXTRA_INDEX_URL``, ``PIP_FIND_LINKS``,
    ``UV_INDEX``, a ``PIP_CONSTRAINT`` file that names one ...). A build without one keeps the
    workflow's own (a mirror in ``PIP_INDEX_URL``)."""
    env = dict(os.environ if environ is None else environ)
    if build.index_url:
        env = {k: v for k, v in env.items() if not k.startswith(("PIP_", "UV_")) or k in _TRANSPORT_VARS}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def _host_pip() -> bool:
    """Whether minify-bot's own pip can install into another environment (``pip --python``, 22.3+):
    then a build's venv is made without pip of its own (seconds faster, and less in it to check)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major, minor = (int(x) for x in version("pip").split(".")[:2])
    except (PackageNotFoundError, ValueError):
        return False
    return (major, minor) >= (22, 3)


class BuildCache:
    """Venvs of pip builds under ``root`` (default: $MINIFY_BOT_BUILDS_DIR, else
    ~/.cache/minify-bot/builds), one per requirement, index and Python, created once and checked
    before every reuse (:meth:`verify`) against the manifest written beside it when it was built."""

    def __init__(self, root: str | os.PathLike | None = None, log=lambda msg: None, python: str | None = None):
        self.root = Path(os.path.abspath(root if root else default_cache_dir()))
        self.log = log
        self.python = python or sys.executable

    def venv_dir(self, build: Build) -> Path:
        key = json.dumps([build.target, build.index_url, list(build.packages), _python_tag(self.python)]
                         + ([list(build.editable)] if build.editable else []))
        slug = re.sub(r"[^A-Za-z0-9.]+", "-", build.target).strip("-")[:40]
        return self.root / f"{slug}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"

    def prepare(self, build: Build) -> Prepared:
        """The build, ready to run (a pip build's venv created first when it is not cached, or
        when the cached one does not check out). An interpreter or venv the user names is theirs:
        it only has to exist."""
        env = dict(build.env)
        if build.kind == "python":
            exe = shutil.which(build.target) or build.target
            if not os.path.isfile(exe):
                raise InfraError(f"build {build.label}: no interpreter at {build.target}")
            return Prepared(build, [exe], env)
        if build.kind == "venv":
            exe = _venv_python(Path(build.target))
            if not exe.is_file():
                raise InfraError(f"build {build.label}: {build.target} is not a virtual environment (no bin/python)")
            return Prepared(build, [str(exe)], env)
        if build.kind == "image":
            docker = shutil.which("docker") or shutil.which("podman")
            if not docker:
                raise InfraError(f"build {build.label}: a container image needs docker or podman on the runner")
            return Prepared(build, [docker], env)
        return Prepared(build, [str(self.ensure_venv(build))], env)

    def ensure_venv(self, build: Build) -> Path:
        """The python of the pip build's venv: reused when :meth:`verify` finds nothing wrong, else
        (moved aside and) created and installed again, the log saying why; under a lock, so two
        processes never build the same one. A half-built venv has no manifest: it is built again."""
        target = self.venv_dir(build)
        self._own_root()
        with _locked(self.root / (target.name + ".lock")):
            why = self.verify(build, target)
            if why is None:
                return _venv_python(target)
            if os.path.lexists(target) or os.path.lexists(_manifest_path(target)):
                self.log(f"build {build.label}: rebuilding {target}: {why}")
                self._discard(target)
            self.log(f"build {build.label}: creating {target}")
            self._create(build, target)
            self._seal(build, target)
            why = self.verify(build, target)
            if why:   # never a venv that would be rebuilt on every use
                raise InfraError(f"build {build.label}: the venv just built does not check out: {why}")
        return _venv_python(target)

    def _own_root(self) -> None:
        """The cache directory, created (only this user may write what it creates) and checked:
        it must be this user's and written by no one else, or a venv could be swapped in it."""
        missing, p = [], self.root
        while not os.path.lexists(p) and p != p.parent:
            missing.append(p)
            p = p.parent
        for d in reversed(missing):
            with contextlib.suppress(FileExistsError):
                os.mkdir(d, 0o700)
        why = _owner_problem(self.root, os.stat)
        if why:
            raise InfraError(f"build cache {self.root}: {why}: give a directory only you can write (--cache-dir)")

    def verify(self, build: Build, target: Path | None = None) -> str | None:
        """Why the pip build's cached venv may not be reused (None: it may), checked in well under
        a second for a CUDA torch:

        - the venv directory, its ``bin/``, ``site-packages/`` and ``torch/`` and the manifest
          (``<venv>.manifest.json``, beside the venv, not in it) are this user's, real directories
          (files) rather than links, and neither group- nor world-writable;
        - as the manifest recorded right after the install: ``bin/python``'s interpreter (its
          resolved path and sha256), ``pyvenv.cfg``, every entry of ``bin/`` (a file's sha256, a
          link's target), every top-level name of ``site-packages`` (a planted module or ``.pth`` is
          a new name) with the sha256 of each top-level file and of each ``*.dist-info/RECORD``;
        - against torch's own RECORD (its sha256 and size per file): ``torch/__init__.py``, every
          ``.py`` directly in ``torch/_dynamo/`` and ``torch/_inductor/``, and torch's scripts in ``bin/``.

        Not checked: the rest of torch and of the other packages, compiled bytecode
        (``__pycache__``), the base interpreter's libraries. Code running as this user can rewrite
        the manifest too: the check finds a venv swapped or edited by anything that did not."""
        target = target or self.venv_dir(build)
        manifest = _manifest_path(target)
        if not os.path.lexists(target) and not os.path.lexists(manifest):
            return "not built yet"
        try:
            why = (_owner_problem(target) or _owner_problem(manifest, kind=stat.S_ISREG)
                   or _owner_problem(target / "bin") or _owner_problem(_site_packages(target)))
            if why:
                return why
            if os.path.lexists(_site_packages(target) / "torch"):
                why = _owner_problem(_site_packages(target) / "torch")
            return why or _fingerprint_problem(_read_manifest(manifest), target) or _record_problem(target)
        except (OSError, ValueError) as exc:
            return f"cannot check it ({exc})"

    def _discard(self, target: Path) -> None:
        """The venv and its manifest out of the way: the manifest removed, the venv renamed aside
        (so a directory this user cannot delete still frees its name) and then deleted."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(_manifest_path(target))
        if not os.path.lexists(target):
            return
        aside = target.with_name(f"{target.name}.stale-{secrets.token_hex(4)}")
        try:
            os.rename(target, aside)
        except OSError as exc:
            raise InfraError(f"cannot move {target} aside to build it again: {exc.strerror or exc}") from exc
        if os.path.islink(aside) or not os.path.isdir(aside):
            os.unlink(aside)
        else:
            shutil.rmtree(aside, ignore_errors=True)
        if os.path.lexists(aside):
            self.log(f"could not delete {aside}: remove it by hand")

    def install_commands(self, build: Build, uv: str | None = None, host_pip: bool | None = None) -> list[list[str]]:
        """The commands that create the pip build's venv and install it (run in an empty directory,
        in :func:`install_env`): with ``uv`` (its path) when given, else ``python -m venv`` and pip
        (minify-bot's own, ``pip --python``, when ``host_pip``; default: when it can). The build's
        index is the only one (``--index-url``); the requirements, checked never to start with '-',
        follow ``--`` all the same."""
        target = self.venv_dir(build)
        exe = str(_venv_python(target))
        index = ["--index-url", build.index_url] if build.index_url else []
        editable = [a for d in build.editable for a in ("-e", d)]
        tail = [*index, *editable, "--", build.target, *build.packages]
        if uv:
            return [[uv, "venv", "--no-config", "--python", self.python, str(target)],
                    [uv, "pip", "install", "--no-config", "--python", exe, *tail]]
        pip_args = ["install", "--quiet", "--disable-pip-version-check", "--no-input", *tail]
        if _host_pip() if host_pip is None else host_pip:
            return [[self.python, "-m", "venv", "--without-pip", str(target)],
                    [sys.executable, "-m", "pip", "--python", exe, *pip_args]]
        return [[self.python, "-m", "venv", str(target)], [exe, "-m", "pip", *pip_args]]

    def _create(self, build: Build, target: Path) -> None:
        import tempfile

        env = install_env(build)
        with tempfile.TemporaryDirectory(prefix="minify-build-") as cwd:   # nothing there for pip to take as a path
            for cmd in self.install_commands(build, shutil.which("uv")):
                res = proc.run(cmd, timeout=INSTALL_TIMEOUT, capture=20_000, cwd=cwd, env=env)
                if res.returncode != 0:
                    shutil.rmtree(target, ignore_errors=True)
                    why = "timed out" if res.timed_out else f"exit {res.returncode}"
                    raise InfraError(f"build {build.label}: {' '.join(cmd[:3])} ... {why}: "
                                     f"{res.output[-1500:].strip()}")

    def _seal(self, build: Build, target: Path) -> None:
        """The manifest of the venv just built, written beside it (atomically: a venv without one
        is half-built); the directories :meth:`verify` checks made writable by this user only."""
        site = _site_packages(target)
        for d in (target, target / "bin", site, site / "torch"):
            if d.is_dir():
                os.chmod(d, stat.S_IMODE(os.lstat(d).st_mode) & ~0o022)
        doc = {"build": build.to_json(), "fingerprint": _fingerprint(target)}
        path = _manifest_path(target)
        tmp = path.with_name(f"{path.name}.{secrets.token_hex(4)}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)

    def probe(self, prepared: Prepared, env: dict | None = None) -> Info:
        """torch's version and git commit in the build, in a fresh process; ``error`` when torch
        cannot be imported there."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="minify-build-") as cwd:
            run_env = {**(env if env is not None else os.environ), **prepared.env}
            res = proc.run(prepared.command(["-c", PROBE_CODE], cwd=cwd), cwd=cwd, env=run_env,
                           timeout=PROBE_TIMEOUT, capture=50_000)
        probe = BuildProbe.read(res.output)
        if probe is not None:
            return Info(**probe.to_json())
        last = [ln for ln in res.output.strip().splitlines() if ln.strip()][-1:] or [res.error or "no output"]
        why = "timed out" if res.timed_out else last[0][:300]
        return Info(error=f"torch does not import: {why}")


def _manifest_path(target: Path) -> Path:
    return target.with_name(target.name + MANIFEST_SUFFIX)


def _site_packages(venv: Path) -> Path:
    found = sorted((venv / "lib").glob("python*/site-packages"))
    return found[0] if len(found) == 1 else venv / "lib" / "python3" / "site-packages"


def _owner_problem(path: Path, stat_of=os.lstat, kind=stat.S_ISDIR) -> str | None:
    """Why ``path`` cannot be trusted as this user's own (None: it can): missing, a link or the
    wrong kind of file, someone else's, or writable by group or others."""
    try:
        st = stat_of(path)
    except FileNotFoundError:
        return f"{path} is missing"
    if not kind(st.st_mode):
        return f"{path} is not a {'directory' if kind is stat.S_ISDIR else 'regular file'} (a link?)"
    if st.st_uid != os.geteuid():
        return f"{path} is owned by uid {st.st_uid}, not by this user (uid {os.geteuid()})"
    if st.st_mode & 0o022:
        return f"{path} is group- or world-writable (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def _sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fingerprint(venv: Path) -> dict:
    """What the manifest records of a venv, as :meth:`BuildCache.verify` lists it."""
    python = os.path.realpath(_venv_python(venv))
    bin_dir, site = venv / "bin", _site_packages(venv)
    entries = {}
    for name in sorted(os.listdir(bin_dir)):
        p = bin_dir / name
        entries[name] = f"link:{os.readlink(p)}" if p.is_symlink() else _sha256(p) if p.is_file() else "other"
    top = {}
    for name in sorted(os.listdir(site)):
        p = site / name
        if name == "__pycache__":
            continue
        if p.is_symlink() or not (p.is_file() or p.is_dir()):
            top[name] = "other"
        elif p.is_file():
            top[name] = _sha256(p)
        elif name.endswith(".dist-info") and (p / "RECORD").is_file():
            top[name] = "RECORD:" + _sha256(p / "RECORD")
        else:
            top[name] = "directory"
    return {"interpreter": python, "interpreter sha256": _sha256(python), "pyvenv.cfg": _sha256(venv / "pyvenv.cfg"),
            "bin": entries, "site-packages": top}


def _read_manifest(path: Path) -> dict:
    with open(path, "rb") as fh:
        data = fh.read(MAX_MANIFEST + 1)
    doc = safejson.loads(data) if len(data) <= MAX_MANIFEST else None
    if not isinstance(doc, dict) or not isinstance(doc.get("fingerprint"), dict):
        raise ValueError(f"{path.name} is not a build manifest")
    return doc


def _fingerprint_problem(manifest: dict, venv: Path) -> str | None:
    """The first thing about the venv that differs from its manifest, in words (None: nothing)."""
    then, now = manifest["fingerprint"], _fingerprint(venv)
    if then.get("interpreter") != now["interpreter"] or then.get("interpreter sha256") != now["interpreter sha256"]:
        return f"bin/python is not the interpreter it was built with (now {now['interpreter']})"
    if then.get("pyvenv.cfg") != now["pyvenv.cfg"]:
        return "pyvenv.cfg changed"
    for part in ("bin", "site-packages"):
        was, is_ = then.get(part), now[part]
        if not isinstance(was, dict):
            return f"the manifest has no {part}"
        for name in sorted(set(was) | set(is_)):
            if name not in is_:
                return f"{part}/{name} is gone"
            if name not in was:
                return f"{part}/{name} was not there when it was built"
            if was[name] != is_[name]:
                return f"{part}/{name} changed since it was built"
    return None


def _record_sampled(path: str) -> bool:
    """The files of torch's RECORD that :func:`_record_problem` checks (a bounded set: about 150
    files, a few MB): torch/__init__.py, the modules directly in torch/_dynamo and torch/_inductor,
    and torch's scripts (``../../../bin/...``)."""
    return (path == "torch/__init__.py" or re.fullmatch(r"torch/_(?:dynamo|inductor)/[^/]+\.py", path) is not None
            or path.startswith("../../../bin/"))


def _record_problem(venv: Path) -> str | None:
    """The first sampled file of torch (:func:`_record_sampled`) that differs from what torch's
    RECORD says of it (sha256 and size), in words; None when all agree or the build has no torch."""
    site = _site_packages(venv)
    records = sorted(site.glob("torch-*.dist-info/RECORD"))
    if len(records) > 1:
        return f"more than one torch in {site}"
    if not records:
        return None
    root = os.path.realpath(venv)
    with open(records[0], encoding="utf-8", newline="") as fh:
        rows = [r for r in csv.reader(fh) if len(r) >= 3 and _record_sampled(r[0])]
    for path, digest, size in (r[:3] for r in rows):
        file = os.path.realpath(site / path)
        if not file.startswith(root + os.sep):
            return f"torch's RECORD names {path}, outside the venv"
        algo, _, want = digest.partition("=")
        if algo != "sha256":
            return f"{path}: torch's RECORD gives no sha256 for it"
        try:
            with open(file, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            return f"{path} (in torch's RECORD) is missing"
        got = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        if got != want or (size and str(len(data)) != size):
            return f"{path} differs from what torch's RECORD says of it"
    return None


def _venv_python(root: Path) -> Path:
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _python_tag(python: str) -> str:
    return os.path.realpath(python)


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive lock on ``path`` (created, never truncated, never through a link)."""
    import fcntl

    fd = os.open(path, os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
def from_options(items: list[str] | None, file: str | None) -> list[Build]:
    """The ordered builds of ``--build`` items and/or ``--builds-file`` (the file's first)."""
    builds = load_builds(file) if file else []
    builds += [parse_build(t) for t in items or []]
    names = [b.name for b in builds]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UsageError(f"builds named more than once: {', '.join(dup)}")
    return builds



_VERSION_WORD = re.compile(r"[0-9][0-9A-Za-z.+_-]{0,63}")


def version_word(value: object) -> str | None:
    """A torch version as issues may show it (``2.15.0+cu132``, ``2.16.0.dev20261120+cpu``), or
    None for anything else: run directories can come from untrusted jobs."""
    return value if isinstance(value, str) and _VERSION_WORD.fullmatch(value) else None


def results_torch(results: ResultsDoc) -> str | None:
    """The torch version a run's results.json records (its ``versions``), when it is a version word."""
    return version_word(results.versions.get("torch"))

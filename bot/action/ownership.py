"""File ownership: in a job container the step runs as root; what it wrote goes back to the
workspace's owner so the runner (a normal user on the host) can clean it up."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from bot.action.context import Context


def fix(ctx: "Context") -> None:
    """Running as root with a workspace owned by someone else: chown the run directory to them."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return
    ws = ctx.env.get("GITHUB_WORKSPACE")
    if not ws or not os.path.isdir(ws) or not ctx.out.exists():
        return
    st = os.stat(ws)
    if st.st_uid == 0:
        return
    for dirpath, dirnames, filenames in os.walk(ctx.out):
        for name in [dirpath, *(os.path.join(dirpath, n) for n in dirnames + filenames)]:
            try:
                os.chown(name, st.st_uid, st.st_gid, follow_symlinks=False)
            except OSError:
                pass

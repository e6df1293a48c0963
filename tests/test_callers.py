"""The documented caller files (docs/callers/): what a user copies into a new repository to adopt the
bot, one short file per trigger. They are the files the docs show, they pass only inputs the
reusable workflows take, they grant every permission the called jobs ask for and nothing more, and
alone in a new repository they pass actionlint and zizmor (offline, as .ci/lint runs them)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CALLERS = sorted((ROOT / "docs" / "callers").glob("*.yml"))
WORKFLOWS = ROOT / ".github" / "workflows"
LEVEL = {"none": 0, "read": 1, "write": 2}
BIN = Path(sys.executable).parent


def _load(path: Path) -> dict:
    return yaml.load(path.read_text(), Loader=yaml.BaseLoader)   # `on` stays a key; values stay text


def _called(uses: str) -> Path:
    """The workflow file a caller's (or a workflow's own) `uses:` names in this repository."""
    if uses.startswith("$/./"):
        return ROOT / uses[len("$/./"):]
    path = uses.split("@", 1)[0].split("/", 2)[2]   # owner/repo/.github/workflows/x.yml@ref
    return ROOT / path


def _perms(value) -> dict[str, int]:
    return {k: LEVEL[v] for k, v in (value or {}).items()} if isinstance(value, dict) else {}


def _needs_beyond(workflow: Path, ceiling: dict[str, int]) -> list[str]:
    """Permissions some job of ``workflow`` (or of a workflow it calls) asks for beyond ``ceiling``:
    GitHub refuses to start such a call, whether the job would run or not."""
    out = []
    for name, job in _load(workflow)["jobs"].items():
        asked = _perms(job.get("permissions"))
        out += [f"{workflow.name}:{name} {k}" for k, v in asked.items() if v > ceiling.get(k, 0)]
        if "uses" in job:
            out += _needs_beyond(_called(job["uses"]), asked)
    return out


def test_there_is_a_caller_per_trigger_and_the_docs_show_each_as_it_is():
    assert [p.name for p in CALLERS] == ["minify-comment.yml", "nightly.yml", "push.yml"]
    action_md = (ROOT / "docs" / "action.md").read_text()
    for path in CALLERS:
        text = path.read_text()
        assert len(text.splitlines()) <= 16, path.name
        assert text in action_md, f"docs/action.md does not show {path.name} as it is"
    assert (ROOT / "docs" / "callers" / "nightly.yml").read_text() in (ROOT / "README.md").read_text()


@pytest.mark.parametrize("path", CALLERS, ids=lambda p: p.name)
def test_a_caller_passes_only_known_inputs_and_grants_exactly_what_the_called_jobs_use(path):
    wf = _load(path)
    assert wf["permissions"] == {}
    (job,) = wf["jobs"].values()
    called = _called(job["uses"])
    inputs = _load(called)["on"]["workflow_call"]["inputs"]
    assert set(job["with"]) <= set(inputs), set(job["with"]) - set(inputs)
    granted = _perms(job["permissions"])
    assert _needs_beyond(called, granted) == []
    # nothing granted that no job uses: dropping any one grant makes some job ask beyond the caller
    for key in granted:
        assert _needs_beyond(called, {k: v for k, v in granted.items() if k != key}), (path.name, key)
    if "issue_comment" in wf["on"]:
        assert job["cache-mode"] == "none"
    else:
        assert "pull-requests" not in granted


def _new_repository(tmp_path: Path, files: dict[str, str]) -> Path:
    repo = tmp_path / "repo"
    (repo / ".github" / "workflows").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    for name, text in files.items():
        pinned = text.replace("<commit>", commit.strip() or "0" * 40)
        (repo / ".github" / "workflows" / name).write_text(pinned)
    return repo


def _lint(repo: Path) -> list[subprocess.CompletedProcess]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GITHUB_")}
    return [subprocess.run([str(BIN / "actionlint")], cwd=repo, capture_output=True, text=True, env=env),
            subprocess.run([str(BIN / "zizmor"), "--offline", "--quiet", ".github/workflows"], cwd=repo,
                           capture_output=True, text=True, env=env)]


@pytest.mark.skipif(not ((BIN / "actionlint").exists() and (BIN / "zizmor").exists()) or not shutil.which("git"),
                    reason="actionlint/zizmor not installed (pyproject's lint extra; .ci/lint installs them)")
def test_a_new_repository_holding_only_the_callers_passes_actionlint_and_zizmor(tmp_path):
    files = {p.name: p.read_text() for p in CALLERS}
    for res in _lint(_new_repository(tmp_path, files)):
        assert res.returncode == 0, res.args[0] + "\n" + res.stdout + res.stderr
    # the lint does look: the /minify caller without its cache limit is refused
    files["minify-comment.yml"] = files["minify-comment.yml"].replace("    cache-mode: none", "    # none")
    actionlint, _ = _lint(_new_repository(tmp_path / "broken", files))
    assert actionlint.returncode != 0 and "cache-mode" in actionlint.stdout

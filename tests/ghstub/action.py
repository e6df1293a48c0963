"""Playing the GitHub Actions runner for `minify-bot action` end-to-end tests: a job's environment
(INPUT_* and GITHUB_* variables, an event payload file, output and summary files) around the real
command in a subprocess, against the GitHub stand-in; the fixtures `runner` and `users`, and helpers
to read what the bot said. Registered as a pytest plugin in tests/conftest.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.action.inputs import TOKEN_STAGES
from tests.ghstub.fixtures import BOT_LOGIN, BOT_TOKEN, REPO, make_client

ROOT = Path(__file__).resolve().parents[2]


def parse_output_file(text: str) -> dict[str, str]:
    """Parse GITHUB_OUTPUT the way the runner does (name<<DELIM ... DELIM, or name=value)."""
    out, lines, k = {}, text.split("\n"), 0
    while k < len(lines):
        line = lines[k]
        if "<<" in line:
            name, delim = line.split("<<", 1)
            k += 1
            body = []
            while lines[k] != delim:
                body.append(lines[k])
                k += 1
            out[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
        k += 1
    return out


@dataclass
class Result:
    rc: int
    stdout: str
    stderr: str
    outputs: dict
    summary: str
    run_dir: Path


class Runner:
    """Plays the Actions runner for one job: fresh workspace, temp dir, output and summary files."""

    def __init__(self, tmp: Path, stub):
        self.tmp, self.stub, self.count = tmp, stub, 0

    def __call__(self, event_name: str, payload, inputs: dict, *, workspace: Path | None = None,
                 token: str = BOT_TOKEN, env: dict | None = None, timeout: float = 1500) -> Result:
        argv, cwd, env, files, job = self.job(event_name, payload, inputs, workspace=workspace, token=token, env=env)
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
        return self.result(proc.returncode, proc.stdout, proc.stderr, files, job)

    def result(self, rc: int, stdout: str, stderr: str, files: dict[str, Path], job: Path) -> Result:
        outputs = parse_output_file(files["output"].read_text())
        run_dir = Path(outputs.get("run-dir") or job / "temp" / "minify-out")
        return Result(rc, stdout, stderr, outputs, files["summary"].read_text(), run_dir)

    def job(self, event_name: str, payload, inputs: dict, *, workspace: Path | None = None,
            token: str = BOT_TOKEN, env: dict | None = None):
        """A fresh job's workspace, event and file commands: the action's command line, working
        directory, environment, file commands and job directory (for a test that starts it itself)."""
        extra_env = dict(env or {})
        self.count += 1
        job = self.tmp / f"job{self.count}"
        ws = workspace or job / "workspace"
        for d in (job, ws, job / "temp"):
            d.mkdir(parents=True, exist_ok=True)
        event = job / "event.json"
        if isinstance(payload, bytes):
            event.write_bytes(payload)
        else:
            event.write_text(payload if isinstance(payload, str) else json.dumps(payload))
        files = self.file_commands(self.count)
        for path in files.values():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_", "ACTIONS_")) and "TOKEN" not in k}
        env.update({
            "PYTHONPATH": str(ROOT), "CI": "true", "GITHUB_ACTIONS": "true",
            "GITHUB_EVENT_NAME": event_name, "GITHUB_EVENT_PATH": str(event),
            "GITHUB_OUTPUT": str(files["output"]), "GITHUB_STEP_SUMMARY": str(files["summary"]),
            "GITHUB_ENV": str(files["env"]), "GITHUB_PATH": str(files["path"]), "GITHUB_STATE": str(files["state"]),
            "GITHUB_WORKSPACE": str(ws), "RUNNER_TEMP": str(job / "temp"),
            "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": self.stub.base_url,
            "GITHUB_SERVER_URL": self.stub.html_origin, "GITHUB_RUN_ID": str(1000 + self.count),
            "GITHUB_ACTION_PATH": str(ROOT), "MINIFY_BOT_WRITE_INTERVAL": "0",
            "INPUT_DEVICE": "cpu",
        })
        # ``token`` plays the job's own token (github.token): action.yml hands it to the stages that
        # run no model code only; a `github-token` input is the workflow's explicit one
        if inputs.get("stage", "all").lower() in TOKEN_STAGES:
            env["MINIFY_JOB_TOKEN"] = token
        for name, value in inputs.items():
            env["INPUT_" + name.upper()] = value  # the runner's spelling: hyphens kept
        env.update(extra_env)
        return [sys.executable, "-m", "bot", "action"], ws, env, files, job

    def file_commands(self, count: int) -> dict[str, Path]:
        """Job ``count``'s file commands where the runner keeps them: one file per step under
        $RUNNER_TEMP/_runner_file_commands/, found by anyone who lists that directory."""
        where = self.tmp / f"job{count}" / "temp" / "_runner_file_commands"
        step = f"{count:08x}-0000-4000-8000-000000000000"
        return {"output": where / f"set_output_{step}", "summary": where / f"step_summary_{step}",
                "env": where / f"set_env_{step}", "path": where / f"add_path_{step}",
                "state": where / f"save_state_{step}"}


@pytest.fixture
def runner(tmp_path, ghstub):
    return Runner(tmp_path, ghstub)


def assert_token_not_leaked(res: Result, token: str = BOT_TOKEN) -> None:
    for line in (res.stdout + res.stderr).splitlines():
        if token in line:   # the only place the runner must see it: masking the secret it is part of
            assert line.startswith("::add-mask::") and "\n" not in line, line
    assert token not in res.summary and token not in json.dumps(res.outputs)


def pr_comment(stub, author_token: str, body: str, *, head_sha: str = "a" * 40, number: int | None = None):
    """Open a PR (unless given) and comment on it as the author of the token; returns the event payload."""
    gh = make_client(stub, author_token)
    repo = gh.get_repo(REPO)
    if number is None:
        number = stub.add_pull(None, head_sha=head_sha, author="walt")
    issue = repo.get_issue(number)
    comment = issue.create_comment(body)
    return {"action": "created", "issue": issue.raw_data, "comment": comment.raw_data,
            "repository": {"full_name": REPO}, "sender": comment.raw_data["user"]}


def reactions(stub, payload) -> list[tuple[str, str]]:
    return sorted((r["user"]["login"], r["content"]) for r in stub.reactions(comment_id=payload["comment"]["id"]))


def bot_comments(stub, number: int) -> list[dict]:
    return [c for c in stub.comments(number=number) if c["user"]["login"] == BOT_LOGIN]


def filed_issues(stub) -> list[dict]:
    """Bug issues (pull requests and the dashboard issue, tested in test_dashboard.py, excluded)."""
    return [i for i in stub.issues() if "minify-bot-dashboard" not in {lb["name"] for lb in i["labels"]}]


@pytest.fixture
def users(ghstub):
    ghstub.add_user("walt", token="walt-token", permission="write")
    return ghstub

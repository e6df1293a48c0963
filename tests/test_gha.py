"""Runner glue: what a workflow sees from the bot (outputs, summary, annotations, masks, inputs)."""

from __future__ import annotations

import io
import json
import re

import pytest

from bot import gha, proc
from bot.errors import UsageError
from tests.ghstub.action import parse_output_file


def test_inputs_accept_the_runner_spelling_with_hyphens_and_the_shell_safe_one():
    assert gha.get_input("dry-run", env={"INPUT_DRY-RUN": " true "}) == "true"
    assert gha.get_input("dry-run", env={"INPUT_DRY_RUN": "yes"}) == "yes"
    # the runner's spelling wins when both are present
    assert gha.get_input("dry-run", env={"INPUT_DRY-RUN": "a", "INPUT_DRY_RUN": "b"}) == "a"
    assert gha.get_input("max new", env={"INPUT_MAX_NEW": "3"}) == "3"
    assert gha.get_input("missing", "dflt", env={}) == "dflt"


def test_typed_inputs_reject_garbage_with_a_usage_error():
    assert gha.get_bool_input("minify", True, env={"INPUT_MINIFY": "False"}) is False
    assert gha.get_bool_input("minify", True, env={}) is True
    with pytest.raises(UsageError, match="true or false"):
        gha.get_bool_input("minify", True, env={"INPUT_MINIFY": "maybe"})
    assert gha.get_int_input("max-new-issues", None, env={"INPUT_MAX-NEW-ISSUES": "5"}) == 5
    with pytest.raises(UsageError, match="integer"):
        gha.get_int_input("max-new-issues", None, env={"INPUT_MAX-NEW-ISSUES": "5; rm -rf /"})
    with pytest.raises(UsageError, match="at least 0"):
        gha.get_int_input("max-new-issues", None, env={"INPUT_MAX-NEW-ISSUES": "-1"}, minimum=0)
    assert gha.get_list_input("models", env={"INPUT_MODELS": "a, b\nc,,\n"}) == ["a", "b", "c"]
    assert gha.get_lines_input("config", env={"INPUT_CONFIG": "x.y=1,2\n\n z.w=3 "}) == ["x.y=1,2", "z.w=3"]


def test_outputs_use_a_heredoc_with_a_random_delimiter_that_survives_hostile_values(tmp_path):
    path = tmp_path / "out"
    env = {"GITHUB_OUTPUT": str(path)}
    hostile = "line1\nevil=1\nghadelimiter_x\nEOF\n"
    gha.set_output("issue-urls", hostile, env)
    gha.set_output("failure-count", "2", env)
    text = path.read_text()
    delims = re.findall(r"<<(ghadelimiter_[0-9a-f-]+)", text)
    assert len(set(delims)) == 2  # a fresh delimiter per output
    parsed = parse_output_file(text)
    assert parsed == {"issue-urls": hostile, "failure-count": "2"}


def test_set_output_without_a_runner_is_a_no_op():
    assert gha.set_output("x", "y", env={}) is False


def test_step_summary_never_exceeds_one_mebibyte(tmp_path):
    path = tmp_path / "summary.md"
    env = {"GITHUB_STEP_SUMMARY": str(path)}
    gha.append_summary("# head\n", env)
    big = "".join(f"| row {k} | {'x' * 80} |\n" for k in range(20000))  # ~1.8 MB
    gha.append_summary(big, env)
    data = path.read_bytes()
    assert len(data) <= gha.SUMMARY_LIMIT
    text = data.decode("utf-8")
    assert text.startswith("# head\n| row 0 |")
    assert "Summary truncated" in text
    # whole lines only: every table line before the note is complete
    body = text.split("> **Summary truncated**")[0].strip().splitlines()
    assert all(line.endswith("|") for line in body[1:])
    # a full file takes nothing more
    gha.append_summary("more", env)
    assert path.read_bytes() == data


def test_summary_cut_never_splits_a_multibyte_character(tmp_path):
    path = tmp_path / "s.md"
    gha.append_summary("é" * 600 + "\n" + "ü" * 600, {"GITHUB_STEP_SUMMARY": str(path)}, limit=1000)
    path.read_bytes().decode("utf-8")  # raises if a character was split
    assert len(path.read_bytes()) <= 1000


def test_annotations_escape_data_and_properties():
    buf = io.StringIO()
    cmds = gha.Commands(buf)
    cmds.error("boom\nsecond line 100%", title="t: x, y", file="dir,line=1/a:b.py", line=3)
    line = buf.getvalue().strip()
    assert line == "::error title=t%3A x%2C y,file=dir%2Cline=1/a%3Ab.py,line=3::boom%0Asecond line 100%25"
    assert line.count("\n") == 0


def test_group_and_untrusted_fence():
    buf = io.StringIO()
    cmds = gha.Commands(buf)
    with cmds.group("check\nx"):
        with cmds.untrusted():
            buf.write("::add-mask::forged\n")
    lines = buf.getvalue().splitlines()
    assert lines[0] == "::group::check%0Ax"
    token = lines[1].split("::stop-commands::")[1]
    assert len(token) > 20
    assert lines[2] == "::add-mask::forged"  # echoed while commands are stopped
    assert lines[3] == f"::{token}::"
    assert lines[4] == "::endgroup::"


def test_add_mask_masks_each_line_and_skips_tiny_values():
    buf = io.StringIO()
    gha.Commands(buf).add_mask("ghp_abcdefghijklmnopqrstuvwxyz0123\nsecond-line-secret\nab")
    assert buf.getvalue().splitlines() == ["::add-mask::ghp_abcdefghijklmnopqrstuvwxyz0123",
                                           "::add-mask::second-line-secret"]
    buf2 = io.StringIO()
    gha.Commands(buf2).add_mask("")
    assert buf2.getvalue() == ""


def test_secrets_are_scrubbed_from_child_environments_and_redacted_from_text():
    env = {"PATH": "/bin", "GITHUB_TOKEN": "t0k3n-value", "INPUT_GITHUB_TOKEN": "x" * 10, "MY_API_KEY": "k",
           "HARMLESS": "ghp_" + "a" * 36, "ACTIONS_RUNTIME_TOKEN": "r", "HOME": "/root"}
    kept = gha.scrubbed_env(env)
    assert kept == {"PATH": "/bin", "HOME": "/root"}
    text = "token ghp_" + "b" * 36 + " and t0k3n-value here"
    assert gha.redact(text, ["t0k3n-value"]) == "token *** and *** here"


def test_a_stage_never_shares_fork_servers_that_outlive_it():
    """A stage's processes end with it: a directory of shared fork servers from the job's environment
    is not handed on (what a server outside the stage forked would escape its end), nor any variable
    of that family."""
    env = {"PATH": "/bin", proc.SHARED_ENV: "/tmp/mbfs-x", proc.SHARED_ENV + "_IDLE": "60", "GITHUB_ENV": "/runner/env"}
    assert gha.stage_env(env, {"X": "1"}) == {"PATH": "/bin", "PYTHONUNBUFFERED": "1", "X": "1"}


def test_markdown_escape_defuses_html_links_mentions_and_tables():
    s = gha.md_escape("<img src=x onerror=alert(1)> [click](http://evil) @here | `x`\nnext", limit=None)
    assert "<" not in s and ">" not in s
    assert "\\[click\\]\\(http\u200b://evil\\)" in s   # not a link, not even a bare one
    assert "@\u200bhere" in s
    assert "\\|" in s and "\n" not in s
    assert gha.md_code("a`b|c") == "`a'b\\|c`"
    assert gha.md_escape("x" * 300, limit=10) == "x" * 9 + "…"


def test_markdown_escape_breaks_issue_references_as_the_issue_bodies_do():
    """GitHub may still link ``\\#3`` to issue 3 (and cross-reference it): the summary's text is
    neutralized with the same zero-width space as the issue bodies' (one definition)."""
    from bot.render import md

    s = gha.md_escape("fixed by #3, see org/repo#12 and @octo-org/team <!-- x -->")
    assert not re.search(r"#\d", s) and "#\u200b3" in s and "#\u200b12" in s
    assert "@\u200bocto-org" in s and "<!--" not in s
    for text in ("#3", "a @b", "x|#12 `y` <b>", "\u202egnp.exe"):
        assert gha.md_escape(text, limit=None) == md(text)


def test_read_event_rejects_malformed_payloads_with_exit_2(tmp_path):
    p = tmp_path / "e.json"
    p.write_text("{not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        gha.read_event({"GITHUB_EVENT_NAME": "issue_comment", "GITHUB_EVENT_PATH": str(p)})
    p.write_text("[1, 2]")
    with pytest.raises(UsageError, match="not a JSON object"):
        gha.read_event({"GITHUB_EVENT_NAME": "issue_comment", "GITHUB_EVENT_PATH": str(p)})
    with pytest.raises(UsageError, match="GITHUB_EVENT_NAME"):
        gha.read_event({})
    with pytest.raises(UsageError, match="cannot read"):
        gha.read_event({"GITHUB_EVENT_NAME": "push", "GITHUB_EVENT_PATH": str(tmp_path / "nope.json")})
    p.write_text(json.dumps({"comment": {"body": "/minify"}, "issue": {"pull_request": {}}}))
    ev = gha.read_event({"GITHUB_EVENT_NAME": "issue_comment", "GITHUB_EVENT_PATH": str(p)})
    assert ev.comment_body == "/minify"
    assert gha.read_event({"GITHUB_EVENT_NAME": "schedule"}).payload == {}


# ---------------------------------------------------------------- action.yml stays consistent


def _action():
    from pathlib import Path

    import yaml

    root = Path(__file__).resolve().parents[1]
    return root, yaml.safe_load((root / "action.yml").read_text())


def test_every_input_reaches_python_through_env_and_is_documented():
    from dataclasses import fields

    from bot.action import inputs as action_inputs

    root, action = _action()
    steps = {s.get("id"): s for s in action["runs"]["steps"]}
    run_env = steps["run"]["env"]
    install_env = steps["install"]["env"]
    read = {action_inputs.input_name(f) for f in fields(action_inputs.Inputs)}
    docs = (root / "docs" / "action.md").read_text()
    for name in action["inputs"]:
        assert f"| `{name}` |" in docs, f"input {name} is not in docs/action.md"
        if name in ("install", "python"):  # used by the install step
            assert any(f"inputs.{name}" in str(v) for v in install_env.values())
            continue
        env_name = "INPUT_" + name.upper().replace("-", "_")
        assert run_env.get(env_name) == f"${{{{ inputs.{name} }}}}", f"{name} is not passed as {env_name}"
        assert name in read, f"input {name} is not read by minify-bot action"
    # no ${{ }} expression is ever interpolated into a script
    for step in action["runs"]["steps"]:
        assert "${{" not in step["run"]
    for name, spec in action["outputs"].items():
        assert f"| `{name}` |" in docs
        assert spec["value"] == f"${{{{ steps.run.outputs.{name} }}}}"


# ------------------------------------------------------------------ bounded JSON, single-line inputs, masking


def test_safejson_bounds_nesting_and_numbers_but_keeps_what_the_checks_write():
    from bot import safejson

    for bomb, reason in (("[" * 100_000 + "]" * 100_000, "levels deep"), ("1" * 5000, "5000 digits"),
                         ('{"a": ' + "9" * 200 + ".5}", "characters"), (b"\xff", "not UTF-8"), ("{", "not valid JSON")):
        with pytest.raises(ValueError, match=reason):
            safejson.loads(bomb)
    assert safejson.loads('{"s": "[[[[[[", "x": NaN}')["s"] == "[[[[[["  # brackets in strings do not count
    assert safejson.loads("[" * 64 + "]" * 64) is not None


def test_single_line_inputs_reject_line_breaks_list_inputs_split_on_them():
    from bot import gha

    env = {"INPUT_BACKEND": "inductor\n::error::x", "INPUT_MODELS": "a\nb,c", "INPUT_MODE": "training\n"}
    with pytest.raises(UsageError, match="single line"):
        gha.get_input("backend", env=env)
    assert gha.get_input("mode", env=env) == "training"  # a trailing newline (YAML `|`) is stripped
    assert gha.get_list_input("models", env) == ["a", "b", "c"]


def test_short_values_are_neither_masked_nor_redacted():
    import io

    from bot import gha

    out = io.StringIO()
    cmds = gha.Commands(out)
    cmds.add_mask("1")
    cmds.add_mask("true")
    cmds.add_mask("a-long-secret")
    assert out.getvalue() == "::add-mask::a-long-secret\n"
    assert gha.redact("failure-count 1, a-long-secret", ["1", "a-long-secret"]) == "failure-count 1, ***"


def test_cache_and_config_names_are_not_secrets_but_their_values_still_are_checked():
    env = {"TIKTOKEN_CACHE_DIR": "/data/tiktoken", "TOKENIZERS_PARALLELISM": "false", "HF_TOKEN_PATH": "/x/token",
           "HF_HOME": "/x/hf", "DOCKER_PASSWORD_FILE": "/run/secrets/pw", "HF_TOKEN": "hf_" + "a" * 30,
           "MY_API_KEY": "k" * 12, "CACHE_DIR": "ghp_" + "c" * 36}
    assert sorted(gha.secret_like_env(env)) == ["CACHE_DIR", "HF_TOKEN", "MY_API_KEY"]
    kept = gha.scrubbed_env(env)
    assert set(kept) == {"TIKTOKEN_CACHE_DIR", "TOKENIZERS_PARALLELISM", "HF_TOKEN_PATH", "HF_HOME",
                         "DOCKER_PASSWORD_FILE"}

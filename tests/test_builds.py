"""bot/builds.py: builds as an input (command line items, a YAML file), probing a build's torch,
its cached venv, and the issue side of a torch upgrade (close comments and "still present")."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bot import builds as bl
from bot.cli import main
from bot.errors import UsageError
from bot.tracker.local import LocalTracker
from tests.ghstub.rundir import check_row, failure_record, write_run


@pytest.mark.parametrize("text, kind, target, name, index", [
    ("torch==2.15.0", "pip", "torch==2.15.0", "2.15.0", None),
    ("torch==2.16.0.dev20261120 @ https://download.pytorch.org/whl/nightly/cpu", "pip", "torch==2.16.0.dev20261120",
     "2.16.0.dev20261120", "https://download.pytorch.org/whl/nightly/cpu"),
    ("nightly-1120=torch==2.16.0.dev20261120", "pip", "torch==2.16.0.dev20261120", "nightly-1120", None),
    ("python:/usr/bin/python3", "python", "/usr/bin/python3", "python:/usr/bin/python3", None),
    ("old=venv:/opt/t213", "venv", "/opt/t213", "old", None),
    ("image:ghcr.io/org/torch:2.15", "image", "ghcr.io/org/torch:2.15", "image:ghcr.io/org/torch:2.15", None),
])
def test_a_build_item_names_how_to_get_its_torch(text, kind, target, name, index):
    b = bl.parse_build(text)
    assert (b.kind, b.target, b.name, b.index_url) == (kind, target, name, index)


@pytest.mark.parametrize("text", ["numpy==2.0", "torch==2.15.0; rm -rf /", ""])
def test_a_build_item_that_is_not_a_torch_is_a_usage_error(text):
    with pytest.raises(UsageError):
        bl.parse_build(text)


def test_a_builds_file_keeps_order_and_environment_and_refuses_what_it_does_not_know(tmp_path):
    f = tmp_path / "builds.yaml"
    f.write_text("- {name: old, pip: torch==2.13.0}\n"
                 "- {name: new, venv: /opt/t215, env: {TORCHINDUCTOR_FREEZING: '1'}}\n")
    old, new = bl.load_builds(str(f))
    assert (old.name, new.name, dict(new.env)) == ("old", "new", {"TORCHINDUCTOR_FREEZING": "1"})
    for bad in ("- {pip: torch==2.13.0, venv: /x}\n", "- {pip: torch==2.13.0, colour: red}\n", "{}\n",
                "- {venv: /x, env: {'1BAD': x}}\n", "- [\n"):
        f.write_text(bad)
        with pytest.raises(UsageError):
            bl.load_builds(str(f))
    with pytest.raises(UsageError, match="more than once"):
        bl.from_options(["torch==2.13.0", "torch==2.13.0"], None)


def test_bisect_needs_two_builds_and_says_so_with_exit_2(tmp_path, capsys):
    assert main(["bisect", str(tmp_path), "--build", "torch==2.15.0"]) == 2
    assert "at least two builds" in capsys.readouterr().err


def test_a_pip_build_has_one_venv_per_requirement_index_and_python(tmp_path):
    cache = bl.BuildCache(tmp_path)
    a = cache.venv_dir(bl.parse_build("torch==2.15.0"))
    assert a == cache.venv_dir(bl.parse_build("torch==2.15.0")) and a.parent == tmp_path
    assert a != cache.venv_dir(bl.parse_build("torch==2.15.0 @ https://download.pytorch.org/whl/cpu"))
    assert a != bl.BuildCache(tmp_path, python="/usr/bin/python3.12").venv_dir(bl.parse_build("torch==2.15.0"))


def test_a_cached_venv_is_reused_and_a_half_built_one_is_rebuilt(tmp_path):
    """The venv of a pip build (here one made beforehand) counts as built only once its record is
    written; ensure_venv then returns it without running pip."""
    cache = bl.BuildCache(tmp_path)
    b = bl.parse_build("torch==2.13.0")
    target = cache.venv_dir(b)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True, timeout=120)
    (target / "minify-bot-build.json").write_text(json.dumps(b.to_json()))
    assert cache.ensure_venv(b) == target / "bin" / "python"
    assert cache.prepare(b).prefix == [str(target / "bin" / "python")]


def test_a_build_without_torch_cannot_run_and_the_probe_says_why(tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    cache = bl.BuildCache(tmp_path / "cache")
    info = cache.probe(cache.prepare(bl.parse_build(f"venv:{bare}")))
    assert info.torch is None and "No module named 'torch'" in info.error
    from bot.errors import InfraError

    with pytest.raises(InfraError, match="not a virtual environment"):
        cache.prepare(bl.parse_build(f"venv:{tmp_path / 'nothing'}"))


def test_the_probe_reads_the_builds_torch_version_and_commit(tmp_path):
    import torch

    cache = bl.BuildCache(tmp_path)
    info = cache.probe(cache.prepare(bl.parse_build(f"python:{sys.executable}")))
    assert (info.torch, info.git, info.error) == (torch.__version__, torch.version.git_version, None)


def test_the_probe_prints_every_field_of_its_record_in_a_build_without_minify_bot(tmp_path):
    """PROBE_CODE is written from BuildProbe's fields and runs where only torch is importable (here
    a stand-in torch, the interpreter isolated from this project); the parent reads its line back."""
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = '9.9.0+probe'\nfrom torch import version\n")
    (fake / "version.py").write_text("git_version = 'abc123'\ncuda = '13.2'\n")
    cache = bl.BuildCache(tmp_path / "cache")
    prepared = cache.prepare(bl.parse_build(f"python:{sys.executable}"))
    prepared.prefix = [sys.executable, "-S", "-E"]   # no site-packages, no PYTHONPATH: bot is not importable
    out = subprocess.run([*prepared.prefix, "-c", f"import sys; sys.path.insert(0, {str(fake.parent)!r}); "
                          + bl.PROBE_CODE], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert bl.BuildProbe.read(out.stdout) == bl.BuildProbe("9.9.0+probe", "abc123", "13.2")
    from dataclasses import fields

    assert sorted(json.loads(out.stdout.removeprefix(bl.BuildProbe.MARK))) == sorted(
        f.name for f in fields(bl.BuildProbe))


def test_a_probe_line_reads_back_as_written_and_malformed_lines_are_skipped():
    probe = bl.BuildProbe("2.15.0+cu132", "deadbeef", None)
    assert bl.BuildProbe.from_json(probe.to_json()) == probe
    out = "\n".join(["noise", "@@build {truncated", "@@build [1, 2]", "@@build " + "[" * 100 + "]" * 100,
                     '@@build {"torch": 2.15, "git": "g", "cuda": ["x"], "later": "y"}', "@@build " +
                     json.dumps(probe.to_json())])
    assert bl.BuildProbe.read(out) == bl.BuildProbe(None, "g", None)   # the first well-formed line; non-text: unknown
    assert bl.BuildProbe.read("@@build {bad\nImportError: no torch\n") is None


def test_an_image_build_runs_the_repro_in_a_container_that_sees_its_folder_and_nothing_of_the_network(tmp_path):
    repro = tmp_path / "failure" / "repro.py"
    repro.parent.mkdir()
    repro.write_text("")
    b = bl.build_from_json({"name": "img", "image": "ghcr.io/org/torch:2.15", "env": {"TORCHINDUCTOR_FREEZING": "1"}})
    cmd = bl.Prepared(b, ["docker"], dict(b.env)).command([str(repro), "run"], cwd=str(tmp_path / "cwd"))
    assert cmd[:5] == ["docker", "run", "--rm", "--network", "none"]
    assert f"{repro.parent}:{repro.parent}" in cmd and ["-w", str(tmp_path / "cwd")] == cmd[cmd.index("-w"):][:2]
    assert cmd[-4:] == ["ghcr.io/org/torch:2.15", "python", str(repro), "run"]
    assert "TORCHINDUCTOR_FREEZING=1" in cmd


@pytest.mark.parametrize("value, shown", [("2.15.0+cu132", "2.15.0+cu132"), ("2.16.0.dev20261120+cpu",
                                          "2.16.0.dev20261120+cpu"), ("@team <b>", None), (3, None)])
def test_only_version_words_reach_an_issue(value, shown):
    assert bl.version_word(value) == shown


# ---------------------------------------------------------------------------- a torch upgrade

def _run(path, started, torch, failing):
    """A run on ``torch``: relu (fixed in 2.15.0 in this story) and log1p (not fixed) fail where listed."""
    rows, recs = [], {}
    for model, op in (("mlp_relu", "aten.relu.default"), ("mlp_log1p", "aten.log1p.default")):
        if model in failing:
            c = check_row(model, baseline="new")
            rows.append(c)
            recs[c["id"]] = failure_record(c, torch=torch, graph=[{"op": op, "dtypes": ["float32"], "ranks": [2]}])
        else:
            rows.append(check_row(model, status="pass", failure_class=None))
    run = write_run(path, rows, recs, started=started)
    doc = json.loads((run / "results.json").read_text())
    doc["versions"]["torch"] = torch
    (run / "results.json").write_text(json.dumps(doc))
    return run


def _records(issues):
    """The local tracker's issues, their markdown escapes removed (what a reader sees)."""
    return json.loads(json.dumps(LocalTracker(issues).records()).replace("\\\\", ""))


def test_upgrading_torch_closes_exactly_the_fixed_bug_naming_the_build_and_lists_the_other_as_still_present(tmp_path):
    issues = tmp_path / "issues"

    def report(run):
        assert main(["report", "--out", str(run), "--issues-dir", str(issues), "--close-after", "2"]) == 0

    report(_run(tmp_path / "r1", "2026-11-01T00:00:00Z", "2.13.0+cpu", {"mlp_relu", "mlp_log1p"}))
    report(_run(tmp_path / "r2", "2026-11-02T00:00:00Z", "2.15.0+cu132", {"mlp_log1p"}))
    report(_run(tmp_path / "r3", "2026-11-03T00:00:00Z", "2.15.0+cu132", {"mlp_log1p"}))
    bugs = {r["title"]: r for r in _records(issues) if "minify-bot-dashboard" not in r["labels"]}
    relu = next(r for t, r in bugs.items() if "relu" in t)
    log1p = next(r for t, r in bugs.items() if "log1p" in t)
    assert len(bugs) == 2
    assert relu["state"] == "closed"
    [close] = [c["body"] for c in relu["comments"] if c["body"].startswith("Closing")]
    assert "Fixed in torch 2.15.0+cu132: it failed on torch 2.13.0+cpu and passes on 2.15.0+cu132" in close
    assert log1p["state"] == "open"
    assert "Present in: torch 2.13.0+cpu, torch 2.15.0+cu132" in log1p["body"]
    assert any("still present in 2.15.0+cu132" in c["body"] for c in log1p["comments"])
    # the dashboard shows each run's torch
    [board] = [r for r in _records(issues) if "minify-bot-dashboard" in r["labels"]]
    assert "torch `2.15.0+cu132`" in board["body"] and "`2.13.0+cpu`" in board["body"]
    # the fixed bug comes back on a later torch: the reopen says which torch brought it back
    report(_run(tmp_path / "r4", "2026-11-04T00:00:00Z", "2.16.0.dev20261120+cpu", {"mlp_relu", "mlp_log1p"}))
    relu = next(r for r in _records(issues) if "relu" in r["title"])
    assert relu["state"] == "open"
    assert "back in torch 2.16.0.dev20261120+cpu (it had passed on torch 2.15.0+cu132)" in relu["comments"][-1]["body"]

"""`minify-bot merge`: shard run directories in, one validated run directory out."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot import rundir

ROOT = Path(__file__).resolve().parents[1]


def check_row(model: str, status: str = "pass", failure_class: str | None = None) -> dict:
    cid = f"{model}-inductor-inference-float32-cpu"
    return {
        "id": cid, "model": model, "spec": {"source": "zoo", "model": model},
        "backend": "inductor", "mode": "inference", "dtype": "float32", "device": "cpu", "dynamic": False,
        "config": {}, "status": status, "failure_class": failure_class, "error": None, "accuracy": None,
        "batch_size": 4, "duration_s": 1.0, "baseline": None, "log": f"checks/{cid}.log",
    }


def failure_doc(r: dict) -> dict:
    """A failure.json as `minify` writes it (docs/run-directory.md)."""
    return {
        "schema": "minify-action/failure/v1", "id": r["id"], "check": r, "class": r["failure_class"],
        "stage": "inductor",
        "ablation": [{"backend": "eager", "status": "pass"}, {"backend": "inductor", "status": r["status"]}],
        "bisect": None, "error": None, "accuracy": {"tolerance": 0.0001, "rmse_res": 0.4, "rmse_ref": 1e-8},
        "repro": {"status": "minimized", "reason": None, "path": "repro.py", "standalone_path": None,
                  "inputs_dir": None, "log": None, "nodes_before": 16, "nodes_after": 3, "queries": 13,
                  "seconds": 2.0, "graph": [{"op": "aten.relu.default", "dtypes": ["float32"], "ranks": [2]}],
                  "verification": {"runs": 3, "failed_same_way": 3, "random_inputs_reproduce": True},
                  "capture": {"repro_after": "aot", "repro_level": 4, "method": "torch", "note": None}},
        "config": {"diff": [], "minimal": []},
        "versions": {"torch": "2.13.0+cpu", "torch_git": None, "cuda": None, "cudnn": None, "triton": None,
                     "gpus": [], "driver": None, "python": "3.11.7", "os": "Linux", "cxx": None},
        "flaky": False,
    }


def make_shard(root: Path, name: str, shard: str, rows: list[dict], *, torch: str = "2.13.0+cpu",
               backend: str = "inductor", failures: bool = True) -> Path:
    d = root / name
    (d / "checks").mkdir(parents=True)
    results = {
        "schema": "minify-action/results/v1", "tool_version": "0.1.0",
        "started": "2026-11-22T03:00:00Z", "finished": "2026-11-22T03:01:00Z", "complete": True,
        "settings": {"source": "zoo", "backend": backend, "mode": "inference", "dtype": "float32",
                     "device": "cpu", "dynamic": False, "config": {}, "timeout": 600, "shard": shard,
                     "baseline": None},
        "versions": {"torch": torch, "python": "3.11.7"},
        "checks": rows,
    }
    (d / "results.json").write_text(json.dumps(results))
    (d / "results.csv").write_text("dev,name,batch_size,accuracy\n" + "".join(
        f"cpu,{r['model']},4,{r['status']}\n" for r in rows))
    for r in rows:
        (d / r["log"]).write_text(f"log of {r['id']}\n")
        if r["failure_class"] and failures:
            f = d / "failures" / r["id"]
            f.mkdir(parents=True)
            (f / "repro.py").write_text("print('repro')\n")
            (f / "failure.json").write_text(json.dumps(failure_doc(r)))
    return d


def run_merge(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "bot", "merge", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_two_shards_merge_into_one_run_dir(tmp_path):
    make_shard(tmp_path / "dl", "shard-1", "1/2", [check_row("mlp_relu", "fail_accuracy", "accuracy")])
    make_shard(tmp_path / "dl", "shard-2", "2/2",
               [check_row("conv", "pass"), check_row("attn", "fail_to_run", "runtime_error")])
    proc = run_merge(str(tmp_path / "dl"), "--out", str(tmp_path / "merged"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "merged 2 shard(s), 3 checks, 2 failing" in proc.stdout
    merged = tmp_path / "merged"
    results = json.loads((merged / "results.json").read_text())
    assert [r["model"] for r in results["checks"]] == ["attn", "conv", "mlp_relu"]
    assert results["complete"] is True and results["settings"]["shard"] == "1/1"
    assert (merged / "failures/mlp_relu-inductor-inference-float32-cpu/repro.py").read_text() == "print('repro')\n"
    assert (merged / "failures/attn-inductor-inference-float32-cpu/failure.json").exists()
    assert (merged / "checks/conv-inductor-inference-float32-cpu.log").exists()
    assert len((merged / "results.csv").read_text().splitlines()) == 4  # header + 3 rows
    record = json.loads((merged / "merge.json").read_text())
    assert record["missing_shards"] == [] and record["failures"] == 2


def test_missing_shard_gives_incomplete_merge(tmp_path):
    make_shard(tmp_path, "s1", "1/3", [check_row("a")])
    make_shard(tmp_path, "s3", "3/3", [check_row("b")])
    proc = run_merge(str(tmp_path / "s1"), str(tmp_path / "s3"), "--out", str(tmp_path / "m"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "missing shards: 2/3" in proc.stdout
    assert json.loads((tmp_path / "m/results.json").read_text())["complete"] is False


@pytest.mark.parametrize("case,expect", [
    ("same_shard_twice", "shard 1/2 was already given"),
    ("duplicate_check", "is also in"),
    ("different_source", "setting 'source' differs"),
    ("different_torch", "torch '2.14.0' differs"),
    ("different_n", "does not belong to a sweep of 2 shards"),
])
def test_conflicting_shards_are_refused(tmp_path, case, expect):
    make_shard(tmp_path, "a", "1/2", [check_row("m1")])
    kwargs, shard, model = {}, "2/2", "m2"
    if case == "same_shard_twice":
        shard = "1/2"
    elif case == "duplicate_check":
        model = "m1"
    elif case == "different_torch":
        kwargs["torch"] = "2.14.0"
    elif case == "different_n":
        shard = "2/3"
    b = make_shard(tmp_path, "b", shard, [check_row(model)], **kwargs)
    if case == "different_source":
        doc = json.loads((b / "results.json").read_text())
        doc["settings"]["source"] = "yaml"
        (b / "results.json").write_text(json.dumps(doc))
    proc = run_merge(str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "m"), cwd=tmp_path)
    assert proc.returncode == 2
    assert expect in proc.stderr
    assert not (tmp_path / "m").exists()


def _tamper(d: Path, case: str) -> None:
    results = json.loads((d / "results.json").read_text())
    if case == "unknown_status":
        results["checks"][0]["status"] = "totally_fine"
    elif case == "newer_schema":
        results["schema"] = "minify-action/results/v2"
    elif case == "bad_id":
        results["checks"][0]["id"] = "../../etc"
    elif case == "not_json":
        (d / "results.json").write_text("{not json")
        return
    elif case == "symlink":
        os.symlink("/etc/passwd", d / "checks" / "x.log")
    elif case == "repro_escape":
        fdir = next((d / "failures").iterdir())
        doc = json.loads((fdir / "failure.json").read_text())
        doc["repro"]["path"] = "../../results.json"
        (fdir / "failure.json").write_text(json.dumps(doc))
    elif case == "oversize":
        (d / "checks" / "big.log").write_bytes(b"x" * 5000)
    (d / "results.json").write_text(json.dumps(results))


@pytest.mark.parametrize("case,expect", [
    ("unknown_status", "invalid at checks/0/status"),
    ("newer_schema", "not supported by this version"),
    ("bad_id", "invalid at checks/0/id"),
    ("not_json", "not valid JSON"),
    ("symlink", "symbolic link"),
    ("repro_escape", "invalid at repro/path"),
    ("oversize", "bytes in total"),
])
def test_untrusted_shards_are_validated(tmp_path, case, expect):
    d = make_shard(tmp_path, "s", "1/1", [check_row("m", "fail_accuracy", "accuracy")])
    _tamper(d, case)
    proc = run_merge(str(d), "--out", str(tmp_path / "m"), "--max-bytes", "4000", cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert expect in proc.stderr
    assert not (tmp_path / "m").exists()


def test_files_outside_the_layout_are_not_copied(tmp_path):
    d = make_shard(tmp_path, "s", "1/1", [check_row("m")])
    (d / "evil.sh").write_text("rm -rf /\n")
    (d / "failures" / "not-a-failing-check").mkdir(parents=True)
    (d / "failures" / "not-a-failing-check" / "repro.py").write_text("x")
    proc = run_merge(str(d), "--out", str(tmp_path / "m"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "ignored 2 file(s)" in proc.stdout
    assert not (tmp_path / "m" / "evil.sh").exists()
    assert not (tmp_path / "m" / "failures").exists()


def test_refuses_non_empty_output(tmp_path):
    d = make_shard(tmp_path, "s", "1/1", [check_row("m")])
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "keep.txt").write_text("mine")
    proc = run_merge(str(d), "--out", str(tmp_path / "m"), cwd=tmp_path)
    assert proc.returncode == 2 and "not empty" in proc.stderr
    assert (tmp_path / "m" / "keep.txt").read_text() == "mine"


def matrix_row(model: str, backend: str, status: str = "pass", failure_class: str | None = None) -> dict:
    row = check_row(model, status, failure_class)
    row.update(id=f"{model}-{backend}-inference-float32-cpu", backend=backend,
               log=f"checks/{model}-{backend}-inference-float32-cpu.log")
    return row


def test_shards_of_two_configurations_merge_side_by_side(tmp_path):
    # a two-configuration sweep sharded over two jobs: inductor in one, aot_eager in the other
    make_shard(tmp_path / "dl", "inductor", "1/1", [matrix_row("a", "inductor", "fail_accuracy", "accuracy"),
                                                    matrix_row("b", "inductor")])
    make_shard(tmp_path / "dl", "aot_eager", "1/1", [matrix_row("a", "aot_eager"), matrix_row("b", "aot_eager")],
               backend="aot_eager")
    proc = run_merge(str(tmp_path / "dl"), "--out", str(tmp_path / "m"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "m/results.json").read_text())
    assert results["complete"] is True and "backend" not in results["settings"]
    assert sorted(c["backend"] for c in results["settings"]["matrix"]) == ["aot_eager", "inductor"]
    assert sorted(r["backend"] for r in results["checks"]) == ["aot_eager", "aot_eager", "inductor", "inductor"]
    doc = rundir.read_results(tmp_path / "m")   # as every later stage reads it
    assert doc.settings.backend is None and doc.settings.shard == "1/1" and doc.complete
    assert sorted(c.label() for c in doc.settings.configurations()) == ["aot_eager, inference, float32, cpu",
                                                                        "inductor, inference, float32, cpu"]
    record = json.loads((tmp_path / "m/merge.json").read_text())
    assert sorted(s["configuration"] for s in record["shards"]) == ["aot_eager, inference, float32, cpu",
                                                                     "inductor, inference, float32, cpu"]
    # and a configuration whose second shard is missing makes the merge incomplete, named
    make_shard(tmp_path / "dl2", "i1", "1/2", [matrix_row("a", "inductor")])
    make_shard(tmp_path / "dl2", "e1", "1/1", [matrix_row("a", "aot_eager")], backend="aot_eager")
    proc = run_merge(str(tmp_path / "dl2"), "--out", str(tmp_path / "m2"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "missing shards: 2/2 (inductor, inference, float32, cpu)" in proc.stdout


# ---------------------------------------------------------------------- artifacts as zip files


def _zip(path: Path, entries: dict, *, links: dict | None = None) -> Path:
    import stat
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return path


def test_a_zipped_artifact_is_unpacked_only_within_the_caps(tmp_path):
    """The report job downloads each shard as the zip GitHub serves, and the bot unpacks it: a zip
    bomb, a link, a name that climbs out, too many files, each refused before or while it is
    written, with nothing of it kept; a good one unpacks and merges."""
    from bot.errors import UsageError
    from bot.merge import expand, unpack_capped
    from tests.ghstub.rundir import write_run

    shards = tmp_path / "shards"
    shards.mkdir()
    good = write_run(tmp_path / "good", [check_row("mlp_relu")], {})
    _zip(shards / "minify-shard-0.zip", {p.relative_to(good).as_posix(): p.read_bytes()
                                         for p in good.rglob("*") if p.is_file()})
    assert [d.name for d in expand([str(shards)])] == ["minify-shard-0"]

    bad = {"bomb": ({"results.json": b"\0" * (2 << 20)}, {}),
           "link": ({"results.json": b"{}"}, {"checks/x.log": "/proc/self/environ"}),
           "climb": ({"../../etc/x": b"x"}, {}),
           "many": ({f"checks/{i}.log": b"x" for i in range(30)}, {})}
    for name, (entries, links) in bad.items():
        z = _zip(tmp_path / f"{name}.zip", entries, links=links)
        with pytest.raises(UsageError):
            unpack_capped(z, tmp_path / name, max_total=1 << 20, max_files=20)
        assert not (tmp_path / name).exists(), name
    assert not (tmp_path.parent / "etc").exists()

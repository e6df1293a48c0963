"""bot/builds.py: builds as an input (command line items, a YAML file) and what an entry may say,
probing a build's torch, its cached venv (installed from its own index only, checked before reuse,
each tested as an attacker would try it, offline against local indexes), and the issue side of a
torch upgrade (close comments and "still present")."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

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


# ---------------------------------------------------------------------------- an entry is checked

NIGHTLY = "https://download.pytorch.org/whl/nightly/cpu"


@pytest.mark.parametrize("entry, problem", [
    ({"pip": "-r x.txt"}, "pip '-r x.txt': starts with '-'"),
    ({"pip": "-e ."}, "pip '-e .': starts with '-'"),
    ({"pip": "git+https://github.com/pytorch/pytorch"}, "not a PEP 508 requirement"),
    ({"pip": "torch @ http://x/t.whl"}, "direct URL reference"),
    ({"pip": "torch @ https://x/t.whl"}, "direct URL reference"),
    ({"pip": "file:///x"}, "not a PEP 508 requirement"),
    ({"pip": "torch==2.15.0; rm -rf /"}, "not a PEP 508 requirement"),
    ({"pip": 2.15}, "pip must be a string"),
    ({"pip": "torch==2.15.0", "index_url": "http://download.pytorch.org/whl/cpu"}, "must be https://"),
    ({"pip": "torch==2.15.0", "index_url": "https://u:p@mirror.example/simple"}, "credentials"),
    ({"pip": "torch==2.15.0", "index_url": "https://token@mirror.example/simple"}, "credentials"),
    ({"pip": "torch==2.15.0", "index_url": "file:///x"}, "must be https://"),
    ({"pip": "torch==2.15.0", "index_url": "https://h/ --trusted-host h"}, "whitespace"),
    ({"pip": "torch==2.15.0", "index_url": "https:///no-host"}, "not an https://HOST/PATH URL"),
    ({"pip": "torch==2.15.0", "packages": "-r x"}, "packages must be a list"),
    ({"pip": "torch==2.15.0", "packages": ["--trusted-host", "x"]}, "packages item '--trusted-host': starts with '-'"),
    ({"pip": "torch==2.15.0", "packages": ["numpy @ https://x/n.whl"]}, "direct URL reference"),
    ({"image": "--privileged"}, "not a docker image reference"),
    ({"image": "alpine --network=host"}, "not a docker image reference"),
    ({"image": "UPPER/case"}, "not a docker image reference"),
    ({"image": "ghcr.io/org/torch@sha256:abc"}, "not a docker image reference"),
    ({"python": "relative/path"}, "not an absolute path"),
    ({"venv": "-x"}, "not an absolute path"),
    ({"venv": "/opt/t", "index_url": "https://h/simple"}, "for pip builds only"),
    ({"venv": "/opt/t", "env": {"TORCH_LOGS": 1}}, "must be a string"),
    ({"venv": "/opt/t", "env": {"TORCH_LOGS": "a\0b"}}, "without NUL"),
    ({"venv": "/opt/t", "env": {"1BAD": "x"}}, "not an environment variable name"),
    ({"venv": "/opt/t", "name": "two\nlines"}, "printable text"),
    ({"venv": "/opt/t", "name": "n" * 200}, "printable text"),
])
def test_a_builds_file_entry_that_could_reach_pip_or_docker_as_an_option_or_a_url_is_refused(entry, problem):
    with pytest.raises(UsageError) as err:
        bl.build_from_json(entry, "nightlies.yaml: build 2")
    assert str(err.value).startswith("nightlies.yaml: build 2: ") and problem in str(err.value)


@pytest.mark.parametrize("item, problem", [
    ("torch==2.15.0 @ http://download.pytorch.org/whl/cpu", "must be https://"),
    ("torch @ http://x/t.whl", "must be https://"),
    ("torch==2.15.0 @ file:///x", "must be https://"),
    ("torch==2.15.0 @ https://u:p@h/simple", "credentials"),
    ("torch==2.15.0 @", "names an index"),
    ("torch==2.15.0 -r x.txt", "not a PEP 508 requirement"),
    ("image:--privileged", "not a docker image reference"),
    ("image:alpine --network=host", "not a docker image reference"),
    ("venv:-x", "not an absolute path"),
    ("python:relative/python", "not an absolute path"),
])
def test_a_build_item_is_checked_the_same_way(item, problem):
    with pytest.raises(UsageError) as err:
        bl.parse_build(item)
    assert str(err.value).startswith(f"build {item.strip()!r}: ") and problem in str(err.value)


@pytest.mark.parametrize("entry", [
    {"pip": "torch==2.15.0"},
    {"pip": "torch==2.16.0.dev20261120", "index_url": NIGHTLY},
    {"pip": "torch[opt-einsum]>=2.15,<3", "packages": ["numpy<3", "minify-action"]},
    {"pip": "torch==2.15.0", "index_url": "https://mirror.example:8443/simple/"},
    {"image": "ghcr.io/org/torch:2.15"},
    {"image": "ghcr.io/org/torch@sha256:" + "0123456789abcdef" * 4},
    {"image": "localhost:5000/torch-nightly:2.16.0.dev20261120"},
    {"image": "pytorch/pytorch:2.15.0-cuda13.2-cudnn9-runtime"},
    {"python": "/usr/bin/python3.11", "name": "system 3.11 (apt)"},
    {"venv": "/opt/t213", "env": {"TORCHINDUCTOR_FREEZING": "1", "EMPTY": ""}},
])
def test_a_well_formed_entry_is_accepted(entry):
    b = bl.build_from_json(entry)
    assert b.to_json()[b.kind] == entry[b.kind] and b.index_url == entry.get("index_url")
    assert bl.parse_build(f"torch==2.16.0.dev20261120 @ {NIGHTLY}").index_url == NIGHTLY


def test_an_editable_install_is_for_code_only_and_comes_before_the_requirements(tmp_path):
    """What a builds file cannot say (-e DIR) a benchmark can, as Build(editable=...): pip gets
    it as an option, and '--' still ends the options before the requirements."""
    with pytest.raises(UsageError, match="Build\\(editable=...\\)"):
        bl.Build("pip", "torch==2.15.0", packages=("-e", str(tmp_path)))
    with pytest.raises(UsageError, match="unknown keys"):
        bl.build_from_json({"pip": "torch==2.15.0", "editable": [str(tmp_path)]})
    b = bl.Build("pip", "torch==2.15.0", editable=(str(tmp_path),))
    install = bl.BuildCache(tmp_path).install_commands(b, host_pip=True)[-1]
    assert install[-4:] == ["-e", str(tmp_path), "--", "torch==2.15.0"]


# ---------------------------------------------------------------------------- the build's index is the only one

def test_a_pip_builds_index_replaces_the_default_index_for_pip_and_uv(tmp_path):
    cache = bl.BuildCache(tmp_path)
    b = bl.parse_build(f"torch==2.16.0.dev20261120 @ {NIGHTLY}")
    target = cache.venv_dir(b)
    for how in ({"host_pip": True}, {"host_pip": False}, {"uv": "/usr/local/bin/uv"}):
        create, install = cache.install_commands(b, **how)
        assert str(target) in create and "--extra-index-url" not in install
        assert install[install.index("--index-url") + 1] == NIGHTLY
        assert install[install.index("--"):] == ["--", "torch==2.16.0.dev20261120"]
        assert ("--no-config" in install) == ("uv" in how)
    assert cache.install_commands(b, host_pip=True)[1][:5] == [sys.executable, "-m", "pip", "--python",
                                                              str(target / "bin" / "python")]
    environ = {"PATH": "/usr/bin", "PIP_CERT": "/etc/ca.pem", "PIP_INDEX_URL": "https://pypi.org/simple",
               "PIP_EXTRA_INDEX_URL": "https://evil.example/simple", "PIP_FIND_LINKS": "/tmp/w",
               "PIP_CONSTRAINT": "/tmp/c.txt", "PIP_TRUSTED_HOST": "evil.example", "UV_INDEX": "https://evil.example",
               "UV_EXTRA_INDEX_URL": "https://evil.example", "PIP_CONFIG_FILE": "/home/u/.config/pip/pip.conf"}
    assert bl.install_env(b, environ) == {"PATH": "/usr/bin", "PIP_CERT": "/etc/ca.pem", "PIP_CONFIG_FILE": os.devnull}
    plain = bl.install_env(bl.parse_build("torch==2.15.0"), environ)   # no index: the workflow's default stays
    assert plain["PIP_INDEX_URL"] == "https://pypi.org/simple" and plain["PIP_CONFIG_FILE"] == os.devnull
    assert "--index-url" not in cache.install_commands(bl.parse_build("torch==2.15.0"), host_pip=True)[1]


def _wheel(where: Path, name: str, version: str, files: dict[str, str], scripts: dict[str, str] | None = None) -> Path:
    """A pure-Python wheel written by hand (a zip of the files, METADATA, WHEEL and RECORD)."""
    stem = f"{re.sub(r'[-_.]+', '_', name)}-{version}"
    entries = dict(files)
    entries.update({f"{stem}.data/scripts/{k}": v for k, v in (scripts or {}).items()})
    entries[f"{stem}.dist-info/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    entries[f"{stem}.dist-info/WHEEL"] = ("Wheel-Version: 1.0\nGenerator: minify-action-tests\n"
                                          "Root-Is-Purelib: true\nTag: py3-none-any\n")
    digest = {p: base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b"=").decode()
              for p, t in entries.items()}
    entries[f"{stem}.dist-info/RECORD"] = "".join(f"{p},sha256={digest[p]},{len(t.encode())}\n"
                                                  for p, t in entries.items()) + f"{stem}.dist-info/RECORD,,\n"
    where.mkdir(parents=True, exist_ok=True)
    path = where / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for p, t in entries.items():
            z.writestr(p, t)
    return path


def _index(root: Path, name: str, version: str, files: dict[str, str], scripts: dict | None = None) -> str:
    """A PEP 503 simple index (a directory: pip reads each project's index.html) of one wheel; its URL."""
    project = root / "simple" / re.sub(r"[-_.]+", "-", name).lower()
    whl = _wheel(project, name, version, files, scripts)
    sha = hashlib.sha256(whl.read_bytes()).hexdigest()
    (project / "index.html").write_text(f'<html><body><a href="{whl.name}#sha256={sha}">{whl.name}</a></body></html>\n')
    return (root / "simple").as_uri()


def _installed(venv: Path, dist: str) -> list[str]:
    """The versions of ``dist`` installed in the venv (its dist-info directories)."""
    found = venv.glob(f"lib/python*/site-packages/{dist}-*.dist-info")
    return [p.name[len(dist) + 1:].removesuffix(".dist-info") for p in found]


@pytest.fixture
def pip_only(monkeypatch):
    """Builds installed with pip even where uv is installed (what these tests run)."""
    which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda cmd, *a, **kw: None if cmd == "uv" else which(cmd, *a, **kw))


def test_a_higher_version_on_the_default_index_does_not_replace_the_builds_own(tmp_path, monkeypatch, pip_only):
    """Dependency confusion, offline: the build's index (the "private" one) has minify-probe-pkg 1.0;
    the attacker's has 99.0 and is everywhere pip looks by default: PIP_INDEX_URL,
    PIP_EXTRA_INDEX_URL, PIP_FIND_LINKS and a pip.conf. The build gets 1.0; a build without an index,
    in the same environment, shows that 99.0 was there to take."""
    code = {"minify_probe_pkg/__init__.py": "VERSION = {!r}\n"}
    private = _index(tmp_path / "private", "minify-probe-pkg", "1.0", {k: v.format("1.0") for k, v in code.items()})
    attacker = _index(tmp_path / "attacker", "minify-probe-pkg", "99.0", {k: v.format("99.0") for k, v in code.items()})
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nextra-index-url = {attacker}\n")
    monkeypatch.setenv("PIP_INDEX_URL", attacker)
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", attacker)
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "attacker" / "simple" / "minify-probe-pkg"))
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    cache = bl.BuildCache(tmp_path / "cache")
    private_build = bl.Build("pip", "minify-probe-pkg", "private", index_url=private)
    cache.prepare(private_build)
    assert _installed(cache.venv_dir(private_build), "minify_probe_pkg") == ["1.0"]
    default_build = bl.Build("pip", "minify-probe-pkg", "default")
    cache.prepare(default_build)
    assert _installed(cache.venv_dir(default_build), "minify_probe_pkg") == ["99.0"]


# ---------------------------------------------------------------------------- a cached build is checked before reuse

def _fake_torch_index(root: Path) -> str:
    """An index with a stand-in torch 2.99.0: the files the cache checks against its RECORD, and a script."""
    files = {"torch/__init__.py": "__version__ = '2.99.0'\nfrom torch import version\n",
             "torch/version.py": "git_version = 'f' * 40\ncuda = None\n",
             "torch/_dynamo/__init__.py": "", "torch/_dynamo/eval_frame.py": "def optimize(): pass\n",
             "torch/_inductor/__init__.py": "", "torch/_inductor/config.py": "freezing = False\n"}
    return _index(root, "torch", "2.99.0", files, {"torchrun": "#!python\nprint('torchrun')\n"})


def _append(path: Path, text: str) -> None:
    with path.open("a") as fh:
        fh.write(text)


def _each_way_in_is_found(cache: bl.BuildCache, b: bl.Build, target: Path, site: Path) -> None:
    """More ways to swap a cached build, each found by verify() and, undone, no longer (no rebuild
    needed to tell)."""
    inductor, torchrun, manifest = site / "torch" / "_inductor" / "config.py", target / "bin" / "torchrun", \
        target.with_name(target.name + ".manifest.json")
    saved = {p: p.read_bytes() for p in (inductor, torchrun, manifest)}
    aside = target.with_name("elsewhere")
    ways = [
        (lambda: inductor.write_text("freezing = True\n"), "torch/_inductor/config.py differs"),
        (lambda: (site / "zz-evil.pth").write_text("import os\n"), "site-packages/zz-evil.pth was not there"),
        (lambda: (site / "numpy").mkdir(), "site-packages/numpy was not there"),
        (lambda: torchrun.write_text("#!/bin/sh\n"), "bin/torchrun changed since it was built"),
        (lambda: _append(target / "pyvenv.cfg", "home = /tmp\n"), "pyvenv.cfg changed"),
        (lambda: target.chmod(0o757), "is group- or world-writable (mode 757)"),
        (lambda: (target / "bin").chmod(0o777), "bin is group- or world-writable"),
        (lambda: manifest.chmod(0o666), "manifest.json is group- or world-writable"),
        (lambda: manifest.write_text("{}"), "is not a build manifest"),
        (lambda: target.symlink_to(target.rename(aside)), "is not a directory (a link?)"),
    ]
    if os.geteuid() == 0:
        ways.append((lambda: os.chown(target, 4242, -1), "is owned by uid 4242, not by this user"))
    cfg = (target / "pyvenv.cfg").read_bytes()
    for edit, why in ways:
        edit()
        assert why in (cache.verify(b) or ""), why
        if target.is_symlink():
            target.unlink()
            aside.rename(target)
        (site / "zz-evil.pth").unlink(missing_ok=True)
        if (site / "numpy").exists():
            (site / "numpy").rmdir()
        for p, data in saved.items():
            p.write_bytes(data)
        (target / "pyvenv.cfg").write_bytes(cfg)
        for p in (target, target / "bin"):
            p.chmod(0o755)
        manifest.chmod(0o644)
        os.chown(target, os.geteuid(), -1)
        assert cache.verify(b) is None, why


def test_a_cached_build_is_checked_before_reuse_and_one_planted_or_edited_is_rebuilt(tmp_path, pip_only):
    """The build venv's path is predictable: a venv planted there, one whose bin/python, torch or
    site-packages was edited, or one that others may write, is moved aside and built again, the
    log saying why; one left alone is reused without running pip."""
    logs: list[str] = []
    cache = bl.BuildCache(tmp_path / "cache", log=logs.append)
    b = bl.Build("pip", "torch==2.99.0", "fake", index_url=_fake_torch_index(tmp_path / "index"))
    target = cache.venv_dir(b)
    site = lambda: next(target.glob("lib/python*/site-packages"))  # noqa: E731

    def prepare() -> str:
        logs.clear()
        assert cache.prepare(b).prefix == [str(target / "bin" / "python")]
        return "\n".join(logs)

    target.parent.mkdir(mode=0o700)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True, timeout=120)
    (target / "minify-bot-build.json").write_text(json.dumps(b.to_json()))   # what once marked a venv built
    assert "manifest.json is missing" in prepare()
    assert cache.probe(cache.prepare(b)).torch == "2.99.0" and (target / "bin" / "torchrun").is_file()
    mark = target / "built-by-this-test"   # a venv built again has no such file
    mark.write_text("")
    assert prepare() == "" and mark.exists()   # left alone: reused, pip not run
    rebuilt = [
        (lambda: (target / "bin" / "python").unlink() or (target / "bin" / "python").write_text(
            "#!/bin/sh\nexec /usr/bin/env python3 \"$@\"\n"), "bin/python is not the interpreter it was built with"),
        (lambda: _append(site() / "torch" / "__init__.py", "import os\n"),
         "torch/__init__.py differs from what torch's RECORD says of it"),
        (lambda: target.chmod(0o775), "is group- or world-writable (mode 775)"),
    ]
    for edit, why in rebuilt:
        edit()
        said = prepare()
        assert f"rebuilding {target}: " in said and why in said, (why, said)
        assert "creating" in said and not mark.exists() and (target / "bin" / "python").is_symlink()
        mark.write_text("")
    _each_way_in_is_found(cache, b, target, site())
    assert prepare() == "" and cache.probe(cache.prepare(b)).torch == "2.99.0"
    assert not [p for p in target.parent.iterdir() if ".stale-" in p.name]   # what was moved aside is gone


def test_a_cache_directory_others_can_write_is_refused(tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    root.chmod(0o777)
    from bot.errors import InfraError

    with pytest.raises(InfraError, match="group- or world-writable"):
        bl.BuildCache(root).prepare(bl.parse_build("torch==2.15.0"))
    fresh = tmp_path / "a" / "b"
    bl.BuildCache(fresh)._own_root()
    assert {oct(p.stat().st_mode & 0o777) for p in (fresh, fresh.parent)} == {"0o700"}


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
    from bot.errors import InfraError

    with pytest.raises(InfraError, match="cannot mount"):   # docker -v reads more after a ':'
        bl.Prepared(b, ["docker"]).command(["run"], cwd=str(tmp_path / "a:/etc:rw"))


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

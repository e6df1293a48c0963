"""Shared test setup.

Tiers. A test is in the fast tier unless it is marked ``slow``; the fast tier compiles nothing, so
``pytest -m "not slow" -n 4`` takes about 6 minutes on 2 cores (its tests mostly start and wait on
subprocesses, so more workers than cores help; README). That is checked, not hoped: a fast-tier test
gets an empty inductor cache directory of its own (inherited by every subprocess it starts), and
fails if anything compiled into it. The ``slow`` tier compiles real graphs; pytest-xdist runs its
files in parallel (``-n auto --dist loadfile`` in pyproject.toml).

Compiled artifacts of the slow tier are shared across the whole test session (and across sessions on
the same checkout) through one inductor cache directory, so only the first compile of each kernel
pays for g++. Stages that need a cold FX-graph cache (minify's capture) disable it themselves.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

# the GitHub stand-in's fixtures (ghstub, ghstub_ghes) and the Actions runner's (runner, users)
pytest_plugins = ["tests.ghstub.fixtures", "tests.ghstub.action"]

ROOT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("MINIFY_ACTION_TEST_CACHE", ROOT / ".cache"))

os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(CACHE / "inductor"))
os.environ.setdefault("PYTHONUNBUFFERED", "1")
# the GitHub the tests talk to is the local stand-in: no client paces its requests and writes for a
# secondary rate limit it does not have (bot.tracker.github.pacing), in this process and every command
os.environ.setdefault("MINIFY_BOT_WRITE_INTERVAL", "0")
# the commit and build of the CI run that runs the tests are no test's: a report counts passing runs
# towards closing by them (bot.report.load.trusted_evidence); a test that needs them sets them
for _name in ("GITHUB_SHA", "MINIFY_BOT_BUILD"):
    os.environ.pop(_name, None)


def run_bot(*args, cwd=None, env=None, timeout=900, check=False) -> subprocess.CompletedProcess:
    """Run `python -m bot ...` as a real subprocess, the way a user or a workflow does."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), full_env.get("PYTHONPATH")]))
    full_env.update(env or {})
    proc = subprocess.run([sys.executable, "-m", "bot", *map(str, args)], cwd=cwd or ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode not in (0, 1):
        raise AssertionError(f"minify-bot {' '.join(map(str, args))} exited {proc.returncode}\n{proc.stderr[-4000:]}")
    return proc


@pytest.fixture(scope="session")
def bot():
    return run_bot


@pytest.fixture
def autograd_device_thread():
    """A thread of this process named as torch's autograd engine names a device thread
    (``pt_autograd_0``), as it stands after a backward where a GPU is visible, or a compiled backward
    on a CUDA build: the device is the boundary (no GPU, a CPU build here)."""
    import ctypes
    import threading

    named, stop = threading.Event(), threading.Event()

    def body():
        ctypes.CDLL(None).prctl(15, b"pt_autograd_0", 0, 0, 0)   # PR_SET_NAME: this thread's name
        named.set()
        stop.wait()

    t = threading.Thread(target=body, daemon=True)
    t.start()
    named.wait()
    yield
    stop.set()
    t.join()


@pytest.fixture(scope="module")
def workdir(request):
    """A scratch directory for one test module's end-to-end runs. Not pytest's tmp_path: its
    retention policy can delete a directory that a concurrent session still uses."""
    d = Path(tempfile.mkdtemp(prefix=f"minify-{request.module.__name__.rpartition('.')[2]}-"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


# The test files that take longest (about 1-4 minutes each on 2 cores), longest first. pytest-xdist
# hands out whole files (--dist loadfile) in collection order (--no-loadscope-reorder); starting
# with the longest lets the workers finish together instead of one running a long file alone at
# the end. Files not named here follow in their usual order.
LONGEST_FIRST = ("test_minify_injected", "test_plain_repro", "test_command_source", "test_grouping_corpus",
                 "test_genuine_bugs", "test_action_e2e", "test_known", "test_action_security", "test_hostile_inputs",
                 "test_suites_models", "test_check_robust", "test_passes", "test_check_zoo", "test_run",
                 "test_dashboard_e2e", "test_run_interrupt", "test_fuzz_e2e", "test_harness_source",
                 "test_minify_graphs", "test_config_carried_bugs")
_renamed = [name for name in LONGEST_FIRST if not (Path(__file__).parent / f"{name}.py").exists()]
assert not _renamed, f"tests/conftest.py LONGEST_FIRST names files that do not exist: {_renamed}"


# Test files whose assertions are about the side that holds the token and talks to GitHub (the
# tracker, the report and its issues, the action's inputs, payloads and security, the run directory's
# schemas, signatures of text): what they check is the same on every torch, so they are marked
# ``torch_independent``. The full suite runs them on the development pin; the run on the current torch
# release (.ci/run) leaves them out (``-m "not slow and not torch_independent"``), which halves it
# without losing what that run is for. A file not named here runs on every torch.
TORCH_INDEPENDENT = frozenset({
    "test_action_authorize", "test_action_dependencies", "test_action_harden", "test_action_inputs",
    "test_action_main", "test_action_ownership", "test_action_pullrequest", "test_action_results",
    "test_action_security", "test_action_stages", "test_action_sticky", "test_action_summary",
    "test_action_token_isolation", "test_artifact_fields", "test_builds", "test_callers", "test_commands_report",
    "test_culprit_render", "test_dashboard", "test_fingerprint", "test_gha", "test_ghstub_conformance",
    "test_hidden_state", "test_hostile_inputs", "test_keygen", "test_merge", "test_pr", "test_render",
    "test_report_context", "test_report_lifecycle", "test_report_load", "test_report_state", "test_rundir",
    "test_safejson", "test_signature", "test_signing", "test_slash", "test_tracker_contract",
    "test_tracker_github", "test_tracker_local", "test_upstream",
})
_gone = sorted(name for name in TORCH_INDEPENDENT if not (Path(__file__).parent / f"{name}.py").exists())
assert not _gone, f"tests/conftest.py TORCH_INDEPENDENT names files that do not exist: {_gone}"


def pytest_configure(config):
    """One directory of shared fork servers for the whole session (bot.proc.SHARED_ENV), made by the
    controlling process and inherited by its workers and every command the tests start: consecutive
    commands with the same interpreter, preload, directory and environment import torch once."""
    if hasattr(config, "workerinput") or os.environ.get("MINIFY_BOT_FORKSERVERS"):
        return
    pool = tempfile.mkdtemp(prefix="mbfs-", dir="/tmp" if os.path.isdir("/tmp") else None)  # a short socket path
    os.environ["MINIFY_BOT_FORKSERVERS"] = config._minify_forkservers = pool


def pytest_unconfigure(config):
    """The session's shared fork servers end with it."""
    import signal

    pool = getattr(config, "_minify_forkservers", None)
    if not pool:
        return
    os.environ.pop("MINIFY_BOT_FORKSERVERS", None)
    for pid_file in Path(pool).glob("*.pid"):
        try:
            os.killpg(int(pid_file.read_text()), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    shutil.rmtree(pool, ignore_errors=True)


def pytest_xdist_auto_num_workers(config):
    """``-n auto``: one worker more than cores. The end-to-end tests wait for part of their time
    (a child's start-up, a program's own time limit, a fork server that is still importing): on 2
    cores with 2 workers a quarter of the CPU time stayed idle (the three heaviest files: 27%), and a
    third worker used it (those files 614 -> 568 s)."""
    return (os.cpu_count() or 1) + 1


def pytest_collection_modifyitems(config, items):
    """Longest files first (see LONGEST_FIRST). And: the per-test cache check below cannot see a
    module-scoped fixture that compiled before the test started, so a fast test may not share a
    test module's own module-scoped fixture with a slow test (that fixture is what makes the slow
    one slow)."""
    for item in items:
        if item.module.__name__.rpartition(".")[2] in TORCH_INDEPENDENT:
            item.add_marker(pytest.mark.torch_independent)
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.module.__name__.rpartition(".")[2], len(rank)))  # stable
    heavy: dict[str, set] = {}
    for item in items:
        if item.get_closest_marker("slow"):
            heavy.setdefault(item.module.__name__, set()).update(_own_module_fixtures(item))
    offenders = [f"{item.nodeid} (uses {', '.join(sorted(shared))})" for item in items
                 if not item.get_closest_marker("slow")
                 and (shared := _own_module_fixtures(item) & heavy.get(item.module.__name__, set()))]
    if offenders:
        raise pytest.UsageError("fast-tier tests use a module fixture that slow tests use; mark them "
                                "@pytest.mark.slow:\n  " + "\n  ".join(offenders))


def _own_module_fixtures(item) -> set:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return set()
    return {name for name, defs in info.name2fixturedefs.items()
            if defs and defs[-1].scope in ("module", "package", "session")
            and getattr(defs[-1].func, "__module__", None) == item.module.__name__}


@pytest.fixture(scope="session", autouse=True)
def _one_intra_op_thread_in_the_test_process():
    """Graphs that tests run in this process run with one intra-op thread, as a minify worker runs
    its in-process queries. The check and minify stages fork their children from the process that
    calls them, and a process that has started an OpenMP thread pool cannot fork safely: a child
    that enters a parallel region waits forever for pool threads it does not have. A pytest worker
    runs many tests in one process, so none of them may start that pool. Processes the tests start
    with a command line are not affected."""
    import torch

    torch.set_num_threads(1)
    yield


@pytest.fixture(autouse=True)
def _fast_tier_compiles_nothing(request, tmp_path_factory, monkeypatch):
    if request.node.get_closest_marker("slow"):
        yield
        return
    cache = tmp_path_factory.mktemp("inductor-cache")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))
    yield
    compiled = sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file())
    if compiled:
        pytest.fail(f"{request.node.nodeid} compiled with inductor ({len(compiled)} files, e.g. {compiled[0]}): "
                    "mark it @pytest.mark.slow", pytrace=False)

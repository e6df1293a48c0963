"""bot/minify/verify.py: a repro is verified by running it in fresh processes and counting how many
fail the way the check failed. The repros here are plain Python scripts (no torch, nothing
compiled) that fail like a repro does: they raise, print an AccuracyError, die by a signal, or pass;
each run is a real process started the way verification starts one."""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

import pytest

from bot.minify import verify as ver
from bot.records import Verification
from bot.signature import Signature, message_keys, signature_of_abort

BOOM = "RuntimeError: kernel cpp_fused_relu_3 read out of bounds at 0x7f3a2c"
BOOM_SIG = Signature("runtime_error", "RuntimeError", message_keys(BOOM))


def _script(tmp_path: Path, body: str, name: str = "repro.py") -> str:
    """A repro script; each run appends its arguments to runs.log beside it (a fresh process runs
    in a directory of its own, so the log's path is absolute)."""
    path = tmp_path / name
    log = tmp_path / "runs.log"
    path.write_text(f"import os, sys\nwith open({str(log)!r}, 'a') as _fh:\n"
                    "    _fh.write(' '.join(sys.argv[1:]) + '\\n')\n" + textwrap.dedent(body))
    return str(path)


def _runs(tmp_path: Path) -> list[str]:
    return (tmp_path / "runs.log").read_text().splitlines()


def test_a_repro_that_raises_the_checks_error_every_time_is_verified_3_of_3(tmp_path):
    path = _script(tmp_path, f"raise RuntimeError({BOOM.partition(': ')[2]!r})\n")
    res = ver.verify(path, BOOM_SIG, runs=3, timeout=60)
    assert (res.runs, res.failed_same_way, res.random_inputs_reproduce) == (3, 3, True)
    assert res.exits == [1, 1, 1]
    assert res.record == Verification(3, 3, True)
    assert "read out of bounds" in res.last_output_tail
    assert sorted(_runs(tmp_path)) == ["", "", "", "run --no-save-dir"]   # 3 with saved inputs, 1 random


def test_a_repro_whose_addresses_and_numbers_differ_still_fails_the_same_way(tmp_path):
    path = _script(tmp_path, "raise RuntimeError('kernel cpp_fused_relu_8 read out of bounds at 0x55aa01')\n")
    assert ver.verify(path, BOOM_SIG, runs=2, timeout=60, random_known=True).failed_same_way == 2


@pytest.mark.parametrize("error", ["ValueError('kernel cpp_fused_relu_3 read out of bounds at 0x7f3a2c')",
                                   "RuntimeError('a different message entirely')"],
                         ids=["other type", "other message"])
def test_a_repro_that_raises_another_error_does_not_fail_the_same_way(tmp_path, error):
    path = _script(tmp_path, f"raise {error}\n")
    res = ver.verify(path, BOOM_SIG, runs=2, timeout=60)
    assert (res.failed_same_way, res.random_inputs_reproduce) == (0, False)
    assert res.exits == [1, 1]


def test_a_repro_that_passes_verifies_nothing(tmp_path):
    path = _script(tmp_path, "print('all outputs match')\n")
    res = ver.verify(path, Signature("accuracy"), runs=3, timeout=60)
    assert (res.failed_same_way, res.random_inputs_reproduce, res.exits) == (0, False, [0, 0, 0])
    assert "all outputs match" in res.last_output_tail


def test_an_accuracy_repro_fails_by_its_accuracy_error_and_a_non_zero_exit(tmp_path):
    fails = _script(tmp_path, "print('AccuracyError: Bad accuracy detected'); sys.exit(1)\n", "fails.py")
    says_only = _script(tmp_path, "print('AccuracyError: Bad accuracy detected')\n", "says.py")
    raises = _script(tmp_path, "raise RuntimeError('boom')\n", "raises.py")
    acc = Signature("accuracy")
    assert ver.verify(fails, acc, runs=2, timeout=60, random_known=False).failed_same_way == 2
    assert ver.verify(says_only, acc, runs=2, timeout=60, random_known=False).failed_same_way == 0
    assert ver.verify(raises, acc, runs=2, timeout=60, random_known=False).failed_same_way == 0


def test_a_crash_is_a_death_by_signal_and_its_exit_is_minus_the_signal(tmp_path):
    path = _script(tmp_path, "import signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    res = ver.verify(path, Signature("crash"), runs=2, timeout=60)
    assert res.exits == [-signal.SIGSEGV] * 2
    assert (res.failed_same_way, res.random_inputs_reproduce) == (2, True)
    # a runtime error is not a segfault
    assert ver.verify(path, BOOM_SIG, runs=1, timeout=60, random_known=False).failed_same_way == 0


def test_a_repro_that_aborts_after_a_cpp_exception_fails_like_the_checks_abort(tmp_path):
    thrown = "terminate called after throwing an instance of 'c10::Error'"
    sig = signature_of_abort(thrown)
    path = _script(tmp_path, f"sys.stderr.write({thrown + chr(10)!r}); sys.stderr.flush(); os.abort()\n")
    res = ver.verify(path, sig, runs=2, timeout=60, random_known=False)
    assert res.exits == [-signal.SIGABRT] * 2 and res.failed_same_way == 2


def test_a_repro_that_fails_only_with_its_saved_inputs_says_random_inputs_do_not_reproduce(tmp_path):
    path = _script(tmp_path, f"""\
        if '--no-save-dir' not in sys.argv:
            raise RuntimeError({BOOM.partition(': ')[2]!r})
        """)
    res = ver.verify(path, BOOM_SIG, runs=2, timeout=60)
    assert (res.failed_same_way, res.random_inputs_reproduce) == (2, False)
    assert res.exits == [1, 1]   # the saved-input runs only


def test_a_known_answer_about_random_inputs_runs_no_random_input_run(tmp_path):
    path = _script(tmp_path, f"raise RuntimeError({BOOM.partition(': ')[2]!r})\n")
    res = ver.verify(path, BOOM_SIG, runs=2, timeout=60, random_known=False)
    assert res.random_inputs_reproduce is False    # taken as given, though random inputs would fail
    assert _runs(tmp_path) == ["", ""]


def test_each_run_is_counted_on_its_own(tmp_path):
    """A flaky repro: every second run passes."""
    counter = tmp_path / "count"
    path = _script(tmp_path, f"""\
        p = {str(counter)!r}
        n = int(open(p).read()) if os.path.exists(p) else 0
        open(p, 'w').write(str(n + 1))
        if n % 2 == 0:
            raise RuntimeError({BOOM.partition(': ')[2]!r})
        """)
    said = []
    res = ver.verify(path, BOOM_SIG, runs=3, timeout=60, random_known=True, jobs=1, log=said.append)
    assert (res.failed_same_way, res.exits) == (2, [1, 0, 1])
    assert said[0] == "verify run 1/3: exit 1, fails the same way"
    assert said[1] == "verify run 2/3: exit 0, does NOT fail the same way"
    assert said[2] == ""                          # the passing run's output (it printed nothing) is logged
    assert said[3] == "verify run 3/3: exit 1, fails the same way"


def test_a_repro_that_hangs_is_stopped_at_the_time_limit_and_does_not_count(tmp_path):
    path = _script(tmp_path, "import time\ntime.sleep(60)\n")
    said = []
    res = ver.verify(path, BOOM_SIG, runs=1, timeout=1, log=said.append)
    assert res.exits == [None] and res.failed_same_way == 0 and res.random_inputs_reproduce is False
    assert res.seconds < 30
    assert said[0] == "verify run 1/1: exit None, does NOT fail the same way"
    assert "verify with random inputs: exit None, does not reproduce" in said


def test_the_output_kept_is_the_end_of_the_last_run(tmp_path):
    path = _script(tmp_path, f"print('x' * 5000)\nraise RuntimeError({BOOM.partition(': ')[2]!r})\n")
    res = ver.verify(path, BOOM_SIG, runs=1, timeout=60, random_known=True)
    assert len(res.last_output_tail) == 2000
    assert res.last_output_tail.rstrip().endswith("read out of bounds at 0x7f3a2c")


def test_a_repro_runs_in_an_empty_directory_of_its_own_with_the_users_path_but_not_the_checkouts(tmp_path,
                                                                                                 monkeypatch):
    from tests.conftest import ROOT

    theirs = str(tmp_path / "their-torch")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), theirs]))
    path = _script(tmp_path, f"""\
        here = os.getcwd()
        assert here != {str(tmp_path)!r} and os.listdir(here) == [], here
        assert os.environ.get('PYTHONPATH') == {theirs!r}, os.environ.get('PYTHONPATH')
        raise RuntimeError({BOOM.partition(': ')[2]!r})
        """)
    res = ver.verify(path, BOOM_SIG, runs=1, timeout=60, random_known=True)
    assert res.failed_same_way == 1, res.last_output_tail


def test_a_relative_path_is_run_as_the_same_file(tmp_path, monkeypatch):
    _script(tmp_path, f"raise RuntimeError({BOOM.partition(': ')[2]!r})\n")
    monkeypatch.chdir(tmp_path)
    assert ver.verify("repro.py", BOOM_SIG, runs=1, timeout=60, random_known=True).failed_same_way == 1


def test_runs_go_side_by_side_except_on_one_core(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert ver.side_by_side(4) == 4
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    assert ver.side_by_side(4) == 1
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert ver.side_by_side(4) == 1

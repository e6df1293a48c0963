"""bot/public.py: no path of the runner in what GitHub shows."""

from __future__ import annotations

import os
import sys

from bot.public import public_markdown, public_text, without_bot_frames


def test_paths_of_this_machine_become_words_and_workspace_files_relative(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    ws.mkdir()
    monkeypatch.chdir(ws)
    monkeypatch.setenv("RUNNER_TEMP", "/srv/runner/temp")
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/srv/cache/ind")
    home = os.path.expanduser("~")
    text = (f"cd {ws}/bench && python {ws}/bench/prog.py; {sys.prefix}/bin/python; "
            f"/srv/runner/temp/x.json; /srv/cache/ind/ab/c.py; {home}/.cache/pip; cwd {ws}")
    out = public_text(text)
    assert out == ("cd bench && python bench/prog.py; <venv>/bin/python; <tmp>/x.json; <inductor-cache>/ab/c.py; "
                   "~/.cache/pip; cwd .")


def test_a_runners_paths_are_recognized_whichever_machine_wrote_them():
    text = ('File "/home/ci/actions-runner/_work/repo/repo/models/net.py", line 3\n'
            'File "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py", line 9\n'
            'File "/tmp/torchinductor_ci/xy/cxy.py", line 1\n'
            "cd /srv/actions-runner/_work/_temp/d; /Users/me/x /home/builder/.cache/y /private/var/tmp/z\n"
            "https://github.com/o/r/blob/main/tmp/file and /usr/lib/python3/dist-packages/numpy/x.py")
    assert public_text(text, env={}) == (
        'File "models/net.py", line 3\n'
        'File "<site-packages>/torch/nn/modules/module.py", line 9\n'
        'File "<inductor-cache>/xy/cxy.py", line 1\n'
        "cd <tmp>/d; ~/x ~/.cache/y <tmp>/z\n"
        "https://github.com/o/r/blob/main/tmp/file and <site-packages>/numpy/x.py")


def test_the_bots_own_frames_leave_a_traceback():
    tb = ('Traceback (most recent call last):\n'
          '  File "/x/bot/torch_adapter/hook.py", line 120, in wrapper\n'
          '    return fn(*args, **kwargs)\n'
          '  File "/x/prog.py", line 4, in main\n'
          '    model(x)\n'
          '  File "/x/bot/suites/command.py", line 7, in run\n'
          'RuntimeError: boom\n')
    assert without_bot_frames(tb) == ('Traceback (most recent call last):\n'
                                      '  File "/x/prog.py", line 4, in main\n'
                                      '    model(x)\n'
                                      'RuntimeError: boom\n')


def test_a_markdown_documents_python_blocks_are_shown_as_verified_and_the_rest_is_public():
    from bot.render import fence

    repro = 's0 = _storage("cpu", "/tmp/AAAA/root+b")\nprint("/tmp/x")'
    doc = "see /tmp/run/log.txt\n\n" + fence(repro, "python") + "\n\n" + fence("File /tmp/x.py", "") + "\n"
    out = public_markdown(doc, env={})
    assert repro in out and "see <tmp>/run/log.txt" in out and "File <tmp>/x.py" in out


def test_a_compiler_command_line_names_no_directory_of_this_machine():
    """A C++ compile error's command line (inductor prints it whole) joins each directory to its
    option letter: ``-I<dir>``, ``-L<dir>``, ``--opt=<dir>``. The interpreter's installation (where its
    headers and libraries are, under the home directory for a pyenv Python) reads as ``<python>``."""
    home = os.path.expanduser("~")
    base = sys.base_prefix
    cmd = (f"g++ /root/k.cpp -I{base}/include/python3.11 -L{base}/lib -I/root/.local/include "
           f"-L/home/ci/lib --sysroot=/home/ci/sysroot -I{home}/inc -Wl,-rpath,/root/lib -I/usr/include")
    out = public_text(cmd, env={})
    assert "/root" not in out and "/home/" not in out and home + "/" not in out, out
    if base not in ("/usr", "/usr/local"):
        assert "-I<python>/include/python3.11 -L<python>/lib" in out, out
    assert "-I~/.local/include -L~/lib --sysroot=~/sysroot" in out and out.endswith("-I/usr/include"), out
    assert public_text("path/root/x and a-b/home/x", env={}) == "path/root/x and a-b/home/x"

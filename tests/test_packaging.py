"""The package as users install it: every subpackage and the templates ship in a wheel."""

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_every_subpackage_and_the_templates_are_packaged():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "bot").rglob("__init__.py")}
    assert on_disk | {"bot.templates"} == set(conf["packages"])
    assert conf["package-dir"]["bot.templates"] == "templates"
    assert list((ROOT / "templates").glob("*.j2"))


def test_cli_help_lists_every_command_without_importing_torch():
    import subprocess

    code = ("import sys; from bot.cli import main\n"
            "try: main(['--help'])\nexcept SystemExit: pass\n"
            "assert 'torch' not in sys.modules, 'help imported torch'")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    for cmd in ("check", "minify", "report", "run", "selftest", "merge", "action"):
        assert cmd in proc.stdout

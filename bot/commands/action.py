"""`minify-bot action`: the GitHub Actions entry point (what action.yml runs); the work is in
the bot.action package (see bot/action/__init__.py)."""

from __future__ import annotations

from bot.action.inputs import STAGES

HELP = "run as a GitHub Action step: read the event and inputs, check/minify/report, write outputs and summary"
DESCRIPTION = HELP + """.

Inputs come from INPUT_<NAME> environment variables (the runner's naming; `INPUT_DRY_RUN` is
accepted for `dry-run`), the event from GITHUB_EVENT_NAME / GITHUB_EVENT_PATH. See docs/action.md."""


def add_arguments(parser) -> None:
    parser.add_argument("--stage", choices=STAGES, help="overrides the `stage` input")
    parser.add_argument("--dry-run", action="store_true", default=None,
                        help="file nothing on GitHub (overrides the `dry-run` input)")


def run(args) -> int:
    from bot.action.main import run as run_action

    return run_action(args)

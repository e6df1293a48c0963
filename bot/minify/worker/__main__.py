"""``python -m bot.minify.worker COMMAND ...``: the worker's process (:func:`bot.minify.worker.main.main`)."""

import sys

from bot.minify.worker.main import main

if __name__ == "__main__":
    sys.exit(main())

"""Bootstrap for PyTorch's harness: apply --config overrides, then run the harness script as __main__."""

import json
import os
import runpy
import sys


def main() -> None:
    script, argv = sys.argv[1], sys.argv[1:]
    overrides = json.loads(os.environ.get("MINIFY_BOT_HARNESS_CONFIG") or "{}")
    if overrides:
        from bot.torch_adapter.config import apply_overrides

        apply_overrides(overrides)
    sys.argv = argv
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()

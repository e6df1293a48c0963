"""`minify-bot merge`: combine the run directories of a sharded sweep into one, for one report
(bot.merge does the work and says what it refuses)."""

from __future__ import annotations

from pathlib import Path

from bot import rundir
from bot.errors import EXIT_OK
from bot.merge import expand, merge

HELP = "merge the run directories of a sharded sweep into one (validating each: they are untrusted)"
DESCRIPTION = """Merge shard run directories (from `check --shard i/N`, typically downloaded workflow
artifacts) into one run directory that `report` files from once. Every shard is schema-validated and
size-capped; links, unexpected files and oversize files are refused. A directory that holds no
results.json but has shard directories inside (what download-artifact produces) is expanded."""


def add_arguments(parser) -> None:
    parser.add_argument("shards", nargs="+", metavar="SHARD_DIR",
                        help="shard run directories (or directories containing them)")
    parser.add_argument("--out", default="minify-out", metavar="DIR",
                        help="the merged run directory (must not exist or be empty; default: minify-out)")
    parser.add_argument("--max-bytes", type=int, default=rundir.MAX_TOTAL_BYTES, metavar="N",
                        help=f"cap on each shard's total size (default {rundir.MAX_TOTAL_BYTES})")
    parser.add_argument("--max-files", type=int, default=rundir.MAX_FILES, metavar="N",
                        help=f"cap on each shard's number of files (default {rundir.MAX_FILES})")


def run(args) -> int:
    record = merge(expand(args.shards), Path(args.out), max_bytes=args.max_bytes, max_files=args.max_files)
    print(f"{record.summary()}, into {args.out}"
          + (f"; missing shards: {', '.join(record.missing_shards)}" if record.missing_shards else ""))
    for name, ignored in record.ignored_files.items():
        print(f"{name}: ignored {len(ignored)} file(s) outside the run-directory layout")
    return EXIT_OK

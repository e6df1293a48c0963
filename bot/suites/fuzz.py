"""``--suite fuzz``: generated programs (bot/fuzz/), each one check, built in the check's own process.

A check's model name is its seed and index (``fuzz-s<seed>-i<index>``), so any finding regenerates
exactly: ``--models fuzz-s3-i000042`` checks that program again, ``python -m bot.fuzz.program 3 42``
prints it. A campaign is ``--seed S`` with ``--fuzz-count N`` (indices 0..N-1) or ``--fuzz-time
SECONDS`` (the sweep stops starting programs when the time is spent, and chooses each next program
for the coverage it adds: bot/fuzz/choose.py); ``--shard I/N`` takes every N-th index, so the
shards of a matrix split the seed's programs between them.
"""

from __future__ import annotations

import sys

from bot.errors import UsageError
from bot.records import CheckRow, Spec
from bot.suites.source import Chooser, ListRequest, Model, Reproduce, Source

# programs listed for a time-bounded campaign, per second of budget: more than any machine runs, so
# that the time budget, not the list, ends the campaign. A program compiled by inductor takes about
# a second on one core, but one checked with --backend eager on a fast core about 0.4 s: 2 a second
# was reached there, and ended such a campaign before its time. Listing is cheap (about 10 us a program)
PROGRAMS_PER_SECOND = 10
INVALID = "invalid program"
MAX_PROGRAMS = 1_000_000


def fuzz_model(seed: int, index: int) -> Model:
    from bot.fuzz.generate import program_name, settings_of

    name = program_name(seed, index)
    return Model(name, Spec(source="fuzz", model=name), f"generated program (seed {seed}, index {index})",
                 settings=settings_of(seed, index))


class Fuzz(Source):
    name = "fuzz"
    # A program's graph is small: its kernels compile one after another in the check's forked child,
    # faster than a pool of compile workers started for each check (an interpreter each, importing
    # torch) could. The generated code is the same either way.
    check_config = {"inductor.compile_threads": 1}
    # A generated program's failure whose captured graph did not fail on its own (or could not be
    # minified) is no issue: nobody runs that program, and an issue without a repro that fails cannot
    # show its bug, nor be told apart from one already filed. Its program, logs and capture stay in the
    # run's artifacts; the campaign's summary counts it.
    files_only_verified = True
    # a generated program promotes integer tensors with Python floats (torch.where(x > 0, x, 2.5)):
    # their result is torch's default float dtype, float32, which the fp64 reference must not keep
    reference_default_dtype = "float64"

    def models(self, req: ListRequest) -> list[Model]:
        from bot.fuzz.generate import parse_name

        if req.names and req.fuzz_count is None and req.fuzz_time is None:   # a finding checked again
            bad = [n for n in req.names if parse_name(n) is None]
            if bad:
                raise UsageError(f"not a fuzz program name: {bad[0]!r} (expected fuzz-s<seed>-i<index>, "
                                 "e.g. fuzz-s3-i000042)")
            return [fuzz_model(*parse_name(n)) for n in req.names]
        seed = 0 if req.seed is None else req.seed
        if seed < 0:
            raise UsageError("--seed must be a non-negative integer")
        count = self.count(req)
        return [fuzz_model(seed, k) for k in range(count)]

    @staticmethod
    def count(req: ListRequest) -> int:
        if req.fuzz_count is not None and req.fuzz_count <= 0:
            raise UsageError("--fuzz-count must be a positive integer")
        if req.fuzz_time is not None and not req.fuzz_time > 0:
            raise UsageError("--fuzz-time must be a positive number of seconds")
        if req.fuzz_count is None and req.fuzz_time is None:
            raise UsageError("--suite fuzz needs --fuzz-count N or --fuzz-time SECONDS (or --models NAME)")
        if req.fuzz_count is not None:
            return min(req.fuzz_count, MAX_PROGRAMS)
        return min(MAX_PROGRAMS, max(1, int(req.fuzz_time * PROGRAMS_PER_SECOND)))

    def chooser(self, models: list[Model]) -> Chooser:
        """A time-bounded campaign checks next the pending program (of this shard) with the most
        unseen coverage, among the next few (bot.fuzz.choose)."""
        from bot.fuzz.choose import Novelty

        return Novelty()

    def build(self, spec: Spec, batch_size: int | None):
        from bot.fuzz.program import build, source

        model, inputs, program = build(spec.model)
        # the generated program goes into the check's log (the artifacts), named by its seed
        print(f"[fuzz] program {program.name}:\n{source(program)}", file=sys.stderr, flush=True)
        return model, tuple(inputs), None

    def describe(self, spec: Spec) -> str:
        return f"fuzz program {spec.model}"

    def discard(self, row: CheckRow) -> str | None:
        """A program that fails (or varies) eagerly here is invalid, not a finding: the generator keeps
        only programs that run eagerly on the CPU it generates on, and another device may differ."""
        if row.failure_class in ("eager_error", "setup_error"):
            return f"{INVALID} (eager: {row.status})"
        return None

    def reproduce(self, check: CheckRow, spec: Spec, models: list[str], trusted_commands=()) -> Reproduce:
        from bot.fuzz.generate import parse_name

        parsed = parse_name(spec.model if isinstance(spec.model, str) else "")
        notes = [f"# the generated program: python -m bot.fuzz.program {parsed[0]} {parsed[1]}"] if parsed else []
        return Reproduce(args=["--suite", "fuzz", *models], notes=notes)


SOURCE = Fuzz()

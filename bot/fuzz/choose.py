"""Coverage-guided choice of a time-bounded campaign's next program (``--fuzz-time``).

The sweep asks :class:`Novelty` which of the pending programs of this shard to check next. It looks
at a window of the next :data:`WINDOW` pending ones (lowest indices first) and takes the one that
adds the most coverage not yet seen:

- a program's *static features* are known before it compiles, from the generator
  (:func:`static_features`): each step's op family with its operand and result dtypes
  (``op:reduce:float16->float32``), each leaf's layout with its dtype (``layout:sliced:int8``), the
  mode (``mode:training``) and the shapes (``shapes:dynamic``). A feature's *family* is its first
  two parts (``op:reduce``, ``layout:sliced``);
- after a check, its row says what inductor generated (its codegen metrics,
  :func:`bot.fuzz.campaign.codegen_features`). A family is *productive* when the latest checked
  program that had it reached generated code not seen before in the campaign.

novelty = the candidate's static features not yet seen + its productive families. The highest wins;
a tie goes to the lowest index; the candidates passed over stay pending and in the window (it slides
over the pending programs, not over the indices). So the choice depends only on the rows so far,
and a program is still named by its seed and index: any finding regenerates exactly.

A candidate's features come from generating it, eagerly (tens of ms). That runs in a child forked
from the sweep's process (as the checks do), so the process that forks the checks starts no thread
pool of its own; one child generates the features of the next ``2 * WINDOW`` pending programs at a
time, so a campaign pays about one fork per window of checks, next to seconds per check. Where this
process ran a backward that torch's autograd threads do not survive a fork from (a compiled one on a
CUDA build), they are generated in a fresh interpreter instead.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from bot.records import CheckRow, Chosen

WINDOW = 12
GENERATE_TIMEOUT_S = 120.0

# [(name, mode, dynamic)] -> each one's static features, in order
FeaturesOf = Callable[[list[tuple[str, str, bool]]], list[list[str]]]


def family(feature: str) -> str:
    """``op:reduce:float16->float32`` -> ``op:reduce``; ``mode:training`` -> itself."""
    return ":".join(feature.split(":")[:2])


def static_features(program, mode: str, dynamic: bool) -> list[str]:
    """What a program exercises, known before it compiles (the module's docstring)."""
    out = {f"op:{f}" for f in program.features}
    out |= {f"layout:{leaf.layout}:{leaf.dtype}" for leaf in program.leaves}
    out.add(f"mode:{mode}")
    out.add("shapes:dynamic" if dynamic else "shapes:static")
    return sorted(out)


def generate_features(batch: list[tuple[str, str, bool]]) -> list[list[str]]:
    """The static features of each (name, mode, dynamic), generated here, in order; a program that
    cannot be generated has none (its check says why)."""
    from bot.fuzz.generate import generate, parse_name

    out: list[list[str]] = []
    for name, mode, dynamic in batch:
        parsed = parse_name(name)
        try:
            out.append(static_features(generate(*parsed), mode, dynamic) if parsed else [])
        except Exception:  # noqa: BLE001 - the check of that program reports it; here it has no features
            out.append([])
    return out


def forked_features(batch: list[tuple[str, str, bool]]) -> list[list[str]]:
    """:func:`generate_features` in a child forked from this process (no eager op runs here), or in
    a fresh interpreter once this process can no longer fork a child that runs a backward
    (:func:`bot.torch_adapter.device.autograd_threads_started`); a child that fails leaves every
    program of the batch without features (then chosen in order)."""
    from bot import proc
    from bot.torch_adapter.device import autograd_threads_started, fork_hooks

    if autograd_threads_started():
        return _checked_features(batch, _fresh_features(batch))

    def child(send) -> list[list[str]]:
        import torch

        torch.set_num_threads(1)   # tensors of a few thousand elements; no thread pool in a forked child
        return generate_features(batch)

    # the guard only: the child compiles nothing, so it has no compile pools to forget (and the
    # forgetting would import inductor in a parent that has not)
    guard = fork_hooks("the fuzzer's candidates")["guard"]
    res = proc.fork(child, timeout=GENERATE_TIMEOUT_S + len(batch), guard=guard)
    return _checked_features(batch, res.value)


FRESH = ("import json, sys, torch; torch.set_num_threads(1); from bot.fuzz.choose import generate_features; "
         "print('@@ ' + json.dumps({'features': generate_features(json.loads(sys.argv[1]))}))")


def _fresh_features(batch: list[tuple[str, str, bool]]) -> Any:
    import json
    import sys

    from bot import proc

    res = proc.run([sys.executable, "-c", FRESH, json.dumps(batch)], timeout=GENERATE_TIMEOUT_S + len(batch),
                   env=proc.bot_env(), events=True)
    return next((e["features"] for e in res.events if isinstance(e, dict) and "features" in e), None)


def _checked_features(batch: list, value: Any) -> list[list[str]]:
    """A child's answer as features, one list of strings per program of the batch."""
    value = value if isinstance(value, list) and len(value) == len(batch) else [[]] * len(batch)
    return [[f for f in one if isinstance(f, str)] if isinstance(one, list) else [] for one in value]


class Novelty:
    """The fuzz source's chooser (:class:`bot.suites.source.Chooser`); one per campaign."""

    def __init__(self, features_of: FeaturesOf = forked_features, window: int = WINDOW):
        self.features_of = features_of
        self.window = window
        self.features: dict[tuple, list[str]] = {}  # (name, mode, dynamic) -> static features
        self.seen: set[str] = set()                # static features of the checked programs
        self.codegen: set[str] = set()             # generated-code features reached so far
        self.productive: dict[str, bool] = {}      # family -> its latest program reached unseen code
        self.learned = 0                           # rows taken into account

    def pick(self, pending: Sequence[tuple[Any, Any]], checked: Sequence[CheckRow]) -> tuple[int, Chosen]:
        t0 = time.perf_counter()
        self.learn(checked)
        keys = [(m.name, s.mode, bool(s.dynamic)) for m, s in pending[:2 * self.window]]
        if any(key not in self.features for key in keys[:self.window]):
            ahead = [key for key in keys if key not in self.features]
            self.features.update(zip(ahead, self.features_of(ahead)))
        window = keys[:self.window]
        scored = [self.score(self.features[key]) for key in window]
        best = max(range(len(window)), key=lambda j: (scored[j][0], -j))
        novelty, unseen, hot = scored[best]
        return best, Chosen(features=list(self.features[window[best]]), novelty=novelty,
                            unseen=unseen, hot=hot, passed_over=best,
                            choose_s=round(time.perf_counter() - t0, 4))

    def score(self, features: list[str]) -> tuple[int, int, int]:
        """(novelty, unseen static features, productive families) of a candidate."""
        unseen = len(set(features) - self.seen)
        hot = sum(1 for f in {family(f) for f in features} if self.productive.get(f))
        return unseen + hot, unseen, hot

    def learn(self, checked: Sequence[CheckRow]) -> None:
        """Take the rows checked since the last pick into account, in order."""
        from bot.fuzz.campaign import codegen_features

        for row in checked[self.learned:]:
            features = row.chosen.features if row.chosen else []
            reached = codegen_features(row)
            new = bool(reached - self.codegen)
            for fam in {family(f) for f in features}:
                self.productive[fam] = new
            self.seen.update(features)
            self.codegen |= reached
        self.learned = len(checked)

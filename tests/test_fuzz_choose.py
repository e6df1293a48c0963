"""A time-bounded fuzz campaign chooses its next program for the coverage it adds (bot/fuzz/choose.py).
Fast tier: programs are generated (eagerly, in forked children, as in a campaign) and the sweep runs
with the eager backend; nothing is compiled by inductor. The rows a chooser learns from are the rows
a check writes (its static features, and inductor's codegen metrics in ``stats``)."""

from __future__ import annotations

import json

import pytest

from bot import rundir
from bot.check.settings import Settings
from bot.check.sweep import run_sweep, varied
from bot.commands.check import select_models
from bot.fuzz import generate as gen
from bot.fuzz.campaign import codegen_features, summary
from bot.fuzz.choose import Novelty, family, forked_features, static_features
from bot.fuzz.program import build, source
from bot.options import CheckOptions
from bot.records import CheckRow, Chosen, RunSettings
from bot.suites.fuzz import fuzz_model

SEED = 0


def _planned(seed: int, indices) -> list:
    return [(m, varied(m, Settings())) for m in (fuzz_model(seed, k) for k in indices)]


def _checked(entry, chosen, codegen: dict | None = None) -> CheckRow:
    """The row the sweep writes for a check (what a chooser learns from)."""
    m, s = entry
    return CheckRow(id=m.name, model=m.name, mode=s.mode, dynamic=s.dynamic, status="pass", chosen=chosen,
                    stats={"codegen": codegen} if codegen else {})


def _campaign(chooser: Novelty, plan: list, picks: int, codegen=lambda name: None) -> list[CheckRow]:
    """What the sweep does with a chooser: pick, check (here: the row), learn; ``codegen(name)``: what
    inductor generated for that program."""
    pending, rows = list(plan), []
    for _ in range(picks):
        j, chosen = chooser.pick(pending, rows)
        entry = pending.pop(j)
        rows.append(_checked(entry, chosen, codegen(entry[0].name)))
    return rows


def test_a_candidate_with_unseen_features_is_chosen_before_one_whose_features_were_all_seen():
    plan = _planned(SEED, range(3))
    chooser = Novelty()
    first, chosen = chooser.pick(plan, [])
    rows = [_checked(plan[first], chosen)]
    assert chosen.unseen == chosen.novelty == len(chosen.features) > 0   # nothing seen yet
    again = plan[first]                        # the same program once more (e.g. another matrix entry)
    other = next(e for k, e in enumerate(plan) if k != first)
    j, why = chooser.pick([again, other], rows)
    assert j == 1 and why.passed_over == 1 and why.unseen > 0, why
    assert set(why.features) - set(chosen.features)          # what it adds is what it was chosen for
    assert chooser.score(chosen.features) == (0, 0, 0)        # the one checked adds nothing now


def test_ties_go_to_the_lowest_index_and_a_candidate_passed_over_stays_pending():
    plan = _planned(SEED, range(4))
    chooser = Novelty()
    rows = _campaign(chooser, plan, 4)
    assert sorted(r.model for r in rows) == [m.name for m, _ in plan]   # every candidate checked once
    # every static feature of these four is seen: nothing to prefer, so in order, lowest index first
    j, chosen = chooser.pick(plan, rows)
    assert (j, chosen.novelty, chosen.passed_over) == (0, 0, 0)
    j, chosen = chooser.pick(plan[2:], rows)
    assert j == 0


def test_families_whose_programs_reached_unseen_generated_code_are_preferred_until_they_stop():
    """A family is productive while its latest program reached generated code not seen before."""
    plan = _planned(SEED, range(12))
    feats = [static_features(gen.generate(SEED, k), s.mode, s.dynamic) for k, (_, s) in enumerate(plan)]
    fams = [{family(f) for f in fs} for fs in feats]
    a, c = next((a, c) for a in range(12) for c in range(12) if a != c and fams[c] - fams[a])
    chooser = Novelty()
    seen = [_checked(plan[k], Chosen(features=feats[k])) for k in range(12)]   # nothing generated
    # program c reached new generated code; then program a reached nothing new
    rows = seen + [_checked(plan[c], seen[c].chosen, {"generated_kernel_count": 3}),
                   _checked(plan[a], seen[a].chosen, {"generated_kernel_count": 2})]
    j, chosen = chooser.pick([plan[a], plan[c]], rows)
    assert j == 1 and chosen.unseen == 0 and chosen.hot == len(fams[c] - fams[a]) > 0, chosen
    # c checked again, reaching nothing new: its families go cold, and the tie goes to the lower position
    rows.append(_checked(plan[c], seen[c].chosen, {"generated_kernel_count": 3}))
    j, chosen = chooser.pick([plan[a], plan[c]], rows)
    assert (j, chosen.novelty) == (0, 0)


def test_shards_choose_within_their_own_indices_and_never_check_the_same_program():
    shards = []
    for i in (1, 2, 3):
        opts = CheckOptions(suite="fuzz", seed=SEED, fuzz_time=30, shard=f"{i}/3").resolved()
        models = select_models(opts)[0]
        rows = _campaign(Novelty(window=4), [(m, varied(m, Settings())) for m in models], 6)
        indices = [gen.parse_name(r.model)[1] for r in rows]
        assert all(k % 3 == i - 1 for k in indices), (i, indices)
        shards.append(indices)
    picked = [k for s in shards for k in s]
    assert len(picked) == len(set(picked)) == 18                    # disjoint, none twice
    assert any(s != sorted(s) for s in shards), shards               # the choice did reorder


def test_a_chosen_program_is_named_by_its_seed_and_index_and_regenerates_the_same():
    plan = _planned(4, range(8))
    rows = _campaign(Novelty(window=8), plan, 3)
    assert [r.chosen.passed_over for r in rows] != [0, 0, 0]
    for row in rows:
        seed, index = gen.parse_name(row.model)
        assert seed == 4
        again = gen.generate(seed, index)
        assert row.chosen.features == static_features(again, row.mode, row.dynamic)
        assert source(again) == source(build(row.model)[2])


def test_the_choice_is_a_function_of_the_outcomes_so_far():
    plan = _planned(SEED, range(10))

    def reached(name):
        return {"generated_kernel_count": 1 + gen.parse_name(name)[1] % 3}

    runs = [[(r.model, r.chosen) for r in _campaign(Novelty(window=5), plan, 7, reached)] for _ in range(2)]
    assert [(m, c.features, c.novelty, c.passed_over) for m, c in runs[0]] == \
           [(m, c.features, c.novelty, c.passed_over) for m, c in runs[1]]
    assert any(c.hot for _, c in runs[0])      # what inductor generated took part in the choice


def test_a_failed_generation_leaves_its_candidates_in_order():
    batch = [("fuzz-s0-i000001", "inference", False), ("not-a-program", "inference", False)]
    feats = forked_features(batch)
    assert feats[0] == static_features(gen.generate(0, 1), "inference", False) and feats[1] == []


def test_candidates_of_a_process_that_cannot_fork_a_backward_get_their_features_from_a_fresh_interpreter(
        autograd_device_thread, capfd):
    batch = [("fuzz-s0-i000001", "inference", False), ("fuzz-s0-i000002", "training", True)]
    assert forked_features(batch) == [static_features(gen.generate(0, k), mode, dyn)
                                      for k, (_, mode, dyn) in zip((1, 2), batch)]


def test_the_summary_reports_coverage_growth_and_how_programs_were_chosen():
    plan = _planned(SEED, range(8))
    rows = _campaign(Novelty(window=4), plan, 8,
                     lambda name: {"generated_kernel_count": 1 + gen.parse_name(name)[1] % 4,
                                   "ir_nodes_pre_fusion": 5})
    text = summary(rows, 60.0)
    static = set().union(*(r.chosen.features for r in rows))
    code = set().union(*(codegen_features(r) for r in rows))
    novel = sum(1 for r in rows if r.chosen.passed_over)
    assert f"coverage growth: {len(static)} static features, {len(code)} generated-code features " \
           "(2 metric kinds)" in text, text
    assert f"choice: {novel} program" in text and f"{8 - novel} in order" in text and 0 < novel < 8
    assert codegen_features(rows[0]) >= {"ir_nodes_pre_fusion:4-7"}
    growth = next(line for line in text.splitlines() if line.startswith("coverage growth"))
    per_quarter = [int(x) for x in growth.split("static +")[1].split(",")[0].split(" +")]
    assert sum(per_quarter) == len(static) and per_quarter[0] >= per_quarter[-1]
    json.dumps(text)


@pytest.mark.parametrize("timed", [False, True])
def test_the_sweep_checks_a_count_in_order_and_lets_the_source_choose_in_a_timed_campaign(tmp_path, timed):
    """``--fuzz-count``: indices 0..N-1 in order; ``--fuzz-time``: every pick is the source's, and the
    row says why. The eager backend: real checks, nothing compiled by inductor."""
    import time

    models = [fuzz_model(SEED, k) for k in range(2)]
    writer = run_sweep(models, Settings(backend="eager", timeout=300), str(tmp_path / "out"),
                       run_settings=RunSettings(source="fuzz"), warm=False, reruns=0,
                       deadline=time.monotonic() + 3600 if timed else None)
    names = [r.model for r in writer.rows]
    assert sorted(names) == [m.name for m in models]
    if not timed:
        assert names == [m.name for m in models] and all(r.chosen is None for r in writer.rows)
        return
    assert all(r.chosen is not None and r.chosen.features for r in writer.rows)
    feats = [static_features(gen.generate(SEED, k), s.mode, s.dynamic)
             for k, s in enumerate(varied(m, Settings()) for m in models)]
    first = max(range(2), key=lambda k: (len(feats[k]), -k))     # nothing seen: the most features first
    assert names[0] == models[first].name and writer.rows[0].chosen.features == feats[first]
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    rundir.validate(doc, "results", "results.json")           # what merge and report accept from a shard
    back = rundir.read_results(tmp_path / "out").checks
    assert [r.chosen for r in back] == [r.chosen for r in writer.rows]

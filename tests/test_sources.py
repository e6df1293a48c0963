"""The model-source registry: every source answers the Source protocol, and a new source is one
object plus one registry line (a toy source registered here is listed, checked, minified's
questions answered and reproduced without touching any other module)."""

from __future__ import annotations

import pytest

from bot import suites
from bot.errors import UsageError
from bot.records import CheckRow, Spec
from bot.report.context import reproduce_command
from bot.suites.builtin import Zoo
from bot.suites.source import ListRequest, Model, Reproduce, Source


def test_every_registered_source_is_a_source_under_its_own_name():
    for name in suites.REGISTRY:
        src = suites.source(name)
        assert isinstance(src, Source) and src.name == name
        assert not (src.program and src.imported)


def test_programs_and_imports_are_told_apart_by_the_source_not_by_its_name():
    kinds = {name: (suites.source(name).program, suites.source(name).imported) for name in suites.REGISTRY}
    assert kinds["command"] == kinds["commands"] == kinds["harness"] == (True, False)
    assert kinds["csv"] == (False, True)
    assert kinds["zoo"] == kinds["yaml"] == kinds["huggingface"] == kinds["timm"] == (False, False)


def test_an_unknown_source_is_a_usage_error_naming_the_known_ones():
    with pytest.raises(UsageError, match="unknown model source 'nope': expected one of zoo, yaml"):
        suites.source("nope")
    with pytest.raises(UsageError):
        suites.build(Spec(source="nope", model="x"))


def test_a_spec_without_a_source_is_the_zoos():
    assert suites.source_of(Spec()).name == suites.source_of(None).name == "zoo"


def test_only_a_program_says_where_it_runs_and_how_it_is_described():
    spec = Spec(source="command", command="python bench.py --model m", cwd="/srv/bench", model="m")
    assert suites.source_of(spec).workdir(spec) == "/srv/bench"
    assert suites.source_of(spec).describe(spec) == "python bench.py --model m"
    harness = Spec(source="harness", suite="huggingface", model="BertForMaskedLM")
    assert suites.source_of(harness).describe(harness) == "harness huggingface BertForMaskedLM"
    assert suites.source("zoo").workdir(Spec(source="zoo")) is None


def _check(spec: dict, model: str = "m") -> CheckRow:
    """A results.json row with ``spec`` (its JSON), as the report reads one."""
    return CheckRow.from_json({
        "model": model, "spec": spec, "backend": "inductor", "mode": "inference", "dtype": "float32",
        "device": "cpu", "config": {"inductor.cpp.inject_relu_bug_TESTING_ONLY": "accuracy"}})


def test_each_source_writes_its_own_part_of_reproduce_locally():
    zoo = reproduce_command(_check({"source": "zoo", "model": "mlp_relu"}, "mlp_relu"), False)
    assert zoo.splitlines()[-1].startswith("minify-bot check --models mlp_relu --backend inductor")
    yaml = reproduce_command(_check({"source": "yaml", "file": "/home/u/models.yaml"}), False)
    assert "--suite yaml --model-file models.yaml --models m" in yaml
    cmd = {"source": "command", "command": "python bench.py", "cwd": "/w"}
    assert "--command COMMAND" in reproduce_command(_check(cmd), False)          # not configured: never offered
    trusted = reproduce_command(_check(cmd), False, trusted_commands=("python bench.py",))
    assert trusted.splitlines()[:2] == ["cd /w", "python bench.py    # the program; it fails with a non-zero exit"]
    assert "--suite command --command 'python bench.py' --name m" in trusted
    harness = reproduce_command(_check({"source": "harness", "suite": "timm_models", "model": "m"}), False)
    assert "--suite harness --pytorch PYTORCH_CHECKOUT --harness-suite timm_models --models m" in harness
    assert harness.startswith("cd PYTORCH_CHECKOUT")
    hostile = reproduce_command(_check({"source": "harness", "suite": "$(rm -rf ~)", "model": "m"}), False)
    assert "--harness-suite SUITE" in hostile and "rm -rf" not in hostile


class Toy(Zoo):
    """A source added the way the docs say: one object (here in this test module) and one
    registry line. Its models are two of the zoo's, built the zoo's way, under its own name."""

    name = "toy"

    def models(self, req: ListRequest) -> list[Model]:
        return [Model(m.name, m.spec.replace(source="toy"), m.description, m.batch_size)
                for m in super().models(req) if m.name in ("mlp_relu", "mlp_gelu")]

    def reproduce(self, check, spec, models, trusted_commands=()) -> Reproduce:
        return Reproduce(args=["--suite", "toy", *models])


TOY = Toy()


@pytest.fixture
def toy_registered(monkeypatch):
    monkeypatch.setitem(suites.REGISTRY, "toy", f"{__name__}:TOY")


def test_a_new_source_is_listed_and_reproduced_with_one_registry_line(toy_registered):
    assert [m.name for m in suites.available("toy")] == ["mlp_relu", "mlp_gelu"]
    assert suites.source_of(Spec(source="toy")) is TOY
    text = reproduce_command(_check({"source": "toy", "model": "mlp_relu"}, "mlp_relu"), False)
    assert "minify-bot check --suite toy --models mlp_relu" in text


@pytest.mark.slow
def test_a_new_source_is_checked_through_the_sweep(toy_registered, tmp_path):
    from bot import rundir
    from bot.options import CheckOptions, call_stage

    rc = call_stage(CheckOptions(out=str(tmp_path), suite="toy", models=["mlp_relu"],
                                 config=["inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy"]))
    row = rundir.read_results(tmp_path).checks[0]
    assert rc == 1 and row.spec.source == "toy" and row.failure_class == "accuracy"


@pytest.mark.slow
def test_a_new_sources_failure_is_filed_with_its_own_reproduce_locally(toy_registered, tmp_path):
    """check then report with nothing but the registry line: one issue, whose Reproduce locally
    is the source's own part."""
    from bot.options import CheckOptions, ReportOptions, call_stage
    from bot.tracker.local import LocalTracker

    out, issues = tmp_path / "out", tmp_path / "issues"
    assert call_stage(CheckOptions(out=str(out), suite="toy", models=["mlp_relu"],
                                   config=["inductor.cpp.inject_relu_bug_TESTING_ONLY=accuracy"])) == 1
    assert call_stage(ReportOptions(out=str(out), tracker="local", issues_dir=str(issues),
                                         dashboard=False)) == 0
    (issue,) = LocalTracker(issues).records()
    assert "mlp_relu" in issue["title"] or "mlp_relu" in issue["body"]
    assert "minify-bot check --suite toy --models mlp_relu" in issue["body"]

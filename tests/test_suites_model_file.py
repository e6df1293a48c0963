"""bot/suites/model_file.py: ``--suite yaml``. A model file lists user models (``name: module:factory``
plus options); each is listed with its options, built by calling its factory, and shown in "reproduce"
without the runner's paths. Every mistake in the file is exit 2 naming the file and the model."""

from __future__ import annotations

import sys

import pytest
import torch

from bot.errors import UsageError
from bot.records import CheckRow
from bot.suites.model_file import SOURCE, yaml_models
from bot.suites.source import ListRequest

FACTORIES = '''
import torch

def pair(batch_size=3):
    return torch.nn.Linear(4, 2), (torch.randn(batch_size, 4),)

def as_dict():
    return {"model": torch.nn.ReLU(), "inputs": torch.randn(5, 2)}

def wrong():
    return 42
'''


@pytest.fixture
def models_dir(tmp_path, monkeypatch):
    (tmp_path / "my_factories_mf.py").write_text(FACTORIES)
    monkeypatch.setattr(sys, "path", list(sys.path))  # build() puts the file's directory on the path
    yield tmp_path
    sys.modules.pop("my_factories_mf", None)


def _file(d, text):
    f = d / "models.yaml"
    f.write_text(text)
    return str(f)


def test_models_are_listed_with_their_options(models_dir):
    path = _file(models_dir, "models:\n  a: my_factories_mf:pair\n"
                             "  b: {factory: 'my_factories_mf:as_dict', tolerance: 0.01, cosine: true, batch_size: 2,"
                             " skip: 'too slow', description: relu}\n")
    a, b = SOURCE.models(ListRequest(file=path))
    assert (a.name, a.spec.factory, a.spec.file, a.skip) == ("a", "my_factories_mf:pair", path, None)
    assert b.options == {"tolerance": 0.01, "cosine": True} and b.batch_size == 2 and b.skip == "too slow"
    assert b.description == "relu"


def test_models_are_built_by_their_factory_with_the_batch_size(models_dir):
    path = _file(models_dir, "a: my_factories_mf:pair\nb: my_factories_mf:as_dict\nc: my_factories_mf:wrong\n")
    a, b, c = yaml_models(path)
    model, inputs, bs = SOURCE.build(a.spec, 7)
    assert isinstance(model, torch.nn.Linear) and inputs[0].shape == (7, 4) and bs == 7
    assert SOURCE.build(a.spec, None)[2] == 3  # the factory's own default, read off the inputs
    model, inputs, bs = SOURCE.build(b.spec, None)  # no batch_size parameter: called as is
    assert isinstance(model, torch.nn.ReLU) and isinstance(inputs, tuple) and bs == 5
    with pytest.raises(TypeError, match="must return \\(model, example_inputs\\), got int"):
        SOURCE.build(c.spec, None)


@pytest.mark.parametrize("text,words", [
    ("a: not_a_factory\n", "model 'a': 'factory' must be 'module:function', got 'not_a_factory'"),
    ("a: no_such_module_mf:f\n", "model 'a': module 'no_such_module_mf' not found"),
    ("a: {factory: 'my_factories_mf:pair', tolerance: -1}\n", "'tolerance' must be a positive number"),
    ("a: {factory: 'my_factories_mf:pair', tolerance: true}\n", "'tolerance' must be a positive number"),
    ("a: {factory: 'my_factories_mf:pair', batch_size: 0}\n", "'batch_size' must be a positive integer"),
    ("a: {factory: 'my_factories_mf:pair', cosine: 'yes'}\n", "'cosine' must be true or false"),
    ("a: {factory: 'my_factories_mf:pair', skip: 3}\n", "'skip' must be true/false or a reason"),
    ("a: {factory: 'my_factories_mf:pair', lr: 3}\n", "unknown option(s) lr"),
])
def test_mistakes_name_the_file_and_the_model(models_dir, text, words):
    path = _file(models_dir, text)
    with pytest.raises(UsageError) as info:
        yaml_models(path)
    assert words in str(info.value) and path in str(info.value)


def test_a_model_file_is_required():
    with pytest.raises(UsageError, match="--suite yaml needs --model-file FILE"):
        SOURCE.models(ListRequest())


def test_reproduce_shows_the_files_name_never_a_runner_path(models_dir):
    (a,) = yaml_models(_file(models_dir, "a: my_factories_mf:pair\n"))
    row = CheckRow(id="a-x", model="a", spec=a.spec)
    assert SOURCE.reproduce(row, a.spec, ["a"]).args == ["--suite", "yaml", "--model-file", "models.yaml", "a"]
    odd = a.spec.replace(file="/srv/models/../secret dir/m.yaml")
    assert SOURCE.reproduce(row, odd, ["a"]).args[3] == "MODELS.yaml"

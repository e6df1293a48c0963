"""``--suite zoo``: the built-in models (the embedded default), defined in bot/suites/zoo.py and
built in the check's own process."""

from __future__ import annotations

from bot.errors import UsageError
from bot.records import Spec
from bot.suites.source import ListRequest, Model, Source


class Zoo(Source):
    name = "zoo"

    def models(self, req: ListRequest) -> list[Model]:
        from bot.suites.zoo import MODELS

        return [Model(name, Spec(source="zoo", model=name), desc, bs) for name, (_, bs, desc) in MODELS.items()]

    def build(self, spec: Spec, batch_size: int | None):
        from bot.suites.zoo import MODELS

        if spec.model not in MODELS:
            raise UsageError(f"unknown zoo model {spec.model!r}")
        factory, default_bs, _ = MODELS[spec.model]
        bs = batch_size or default_bs
        model, inputs = factory(bs)
        return model, tuple(inputs), bs


SOURCE = Zoo()

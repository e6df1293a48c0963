"""Stand-in for benchmarks/dynamo/huggingface.py (see common.py): real transformers models at their
default (full) sizes, built from their configs with random weights as the real harness builds them,
fed random token ids of the harness's accuracy-mode shape. Needs the ``models`` extra (transformers).
For measuring what a run costs on a model of real size (benchmarks/harness_overhead.py); the tests
use the tiny torchbench/timm stand-ins."""
import sys

import torch

from common import main

SEQ_LEN = 512  # the real harness's default sequence length for these models


class _Logits(torch.nn.Module):
    """The model's logits (the harness compares the whole output; its first tensor is enough here)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids):
        return self.model(input_ids=ids.long()).logits


def _masked_lm(config_name, model_name):
    def build(bs):
        import transformers

        config = getattr(transformers, config_name)()
        model = getattr(transformers, model_name)(config)
        ids = torch.randint(0, config.vocab_size, (bs, SEQ_LEN))
        return _Logits(model), ids.float()   # common.main casts the example to the dtype; ids go back to long
    return build


MODELS = {"MobileBertForMaskedLM": _masked_lm("MobileBertConfig", "MobileBertForMaskedLM"),
          "BertForMaskedLM": _masked_lm("BertConfig", "BertForMaskedLM")}

if __name__ == "__main__":
    # the real harness's accuracy-mode batch size for huggingface models is 1 (on CPU: 1 too)
    sys.exit(main(MODELS, {name: 1 for name in MODELS}))

"""``--suite huggingface``: real transformers architectures built offline from their config classes.

Nothing is downloaded: each model is the library's own implementation, instantiated from its
configuration class with a tiny configuration (2 layers, hidden size 32-64) and random weights,
so a check runs on a CPU in seconds. Names follow PyTorch's benchmark harness where it has the
model (``BertForMaskedLM``, ``MobileBertForMaskedLM``, ``T5Small``, ...). Needs the optional
extra: ``pip install 'minify-action[models]'``.
"""

from __future__ import annotations

from typing import Any, Callable

from bot.errors import UsageError
from bot.records import Spec
from bot.suites.source import Library, Model

EXTRA_HINT = "pip install 'minify-action[models]'"
SEQ = 16
VOCAB = 256


def require_transformers():
    try:
        import transformers
    except ImportError as exc:
        raise UsageError(f"--suite huggingface needs the transformers package, which is not installed "
                         f"({exc}); install the models extra: {EXTRA_HINT}") from exc
    return transformers


def _text(bs: int, names=("input_ids",)):
    import torch

    ids = torch.randint(0, VOCAB, (bs, SEQ))
    return tuple(ids if n.endswith("input_ids") else torch.randint(0, VOCAB, (bs, SEQ)) for n in names)


def _image(bs: int, size: int = 32):
    import torch

    return (torch.randn(bs, 3, size, size),)


# name -> (config class, model class, config kwargs, input names, input factory, description)
SMALL_BERT = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                  intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0)
MODELS: dict[str, tuple[str, str, dict, tuple, Callable, str]] = {
    "BertForMaskedLM": ("BertConfig", "BertForMaskedLM", SMALL_BERT, ("input_ids",), _text,
                        "BERT encoder, masked-LM head (gelu)"),
    "MobileBertForMaskedLM": ("MobileBertConfig", "MobileBertForMaskedLM",
                              dict(vocab_size=VOCAB, hidden_size=32, embedding_size=16, num_hidden_layers=2,
                                   num_attention_heads=2, intermediate_size=32, intra_bottleneck_size=16,
                                   true_hidden_size=16, num_feedforward_networks=2, max_position_embeddings=64,
                                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
                              ("input_ids",), _text, "MobileBERT: bottlenecks, NoNorm, stacked relu FFNs"),
    "T5Small": ("T5Config", "T5ForConditionalGeneration",
                dict(vocab_size=VOCAB, d_model=32, d_kv=16, d_ff=64, num_layers=2, num_decoder_layers=2,
                     num_heads=2, relative_attention_num_buckets=8, dropout_rate=0.0, decoder_start_token_id=0,
                     use_cache=False),
                ("input_ids", "decoder_input_ids"), _text, "T5 encoder-decoder, relative position bias (relu)"),
    "DistilBertForMaskedLM": ("DistilBertConfig", "DistilBertForMaskedLM",
                              dict(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64,
                                   max_position_embeddings=64, dropout=0.0, attention_dropout=0.0),
                              ("input_ids",), _text, "DistilBERT (gelu)"),
    "GPT2ForSequenceClassification": ("GPT2Config", "GPT2ForSequenceClassification",
                                      dict(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=64,
                                           resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, pad_token_id=0,
                                           bos_token_id=1, eos_token_id=2, use_cache=False,
                                           num_labels=4),
                                      ("input_ids",), _text, "GPT-2 decoder, causal attention (gelu_new)"),
    "MambaForCausalLM": ("MambaConfig", "MambaForCausalLM",
                         dict(vocab_size=VOCAB, hidden_size=32, state_size=8, num_hidden_layers=2, expand=2,
                              conv_kernel=4, use_cache=False),
                         ("input_ids",), _text, "Mamba selective state space, sequential scan (softplus)"),
    "ViTForImageClassification": ("ViTConfig", "ViTForImageClassification",
                                  dict(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=2, intermediate_size=64, num_labels=10,
                                       hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0),
                                  ("pixel_values",), _image, "Vision Transformer, 4x4 patches (gelu)"),
    "ResNetForImageClassification": ("ResNetConfig", "ResNetForImageClassification",
                                     dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1],
                                          layer_type="basic", num_labels=10),
                                     ("pixel_values",), _image, "ResNet, basic blocks, batchnorm (relu)"),
}
DEFAULT_BATCH = 2


class KeywordCall:
    """Calls a transformers model with keyword inputs, so the check can pass tensors positionally."""

    def __new__(cls, model, names: tuple):
        import torch

        class _Call(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, *tensors):
                return self.model(**dict(zip(names, tensors)), return_dict=False)

        return _Call()


def build_model(name: str, batch_size: int | None = None, **overrides) -> tuple[Any, tuple, int]:
    """The model and example inputs. ``overrides`` change the config (e.g. ``num_hidden_layers=18,
    hidden_act="relu"`` for a deep variant)."""
    transformers = require_transformers()
    if name not in MODELS:
        raise UsageError(f"unknown huggingface model {name!r}")
    cfg_cls, model_cls, kwargs, names, inputs, _ = MODELS[name]
    config = getattr(transformers, cfg_cls)(**{**kwargs, **overrides})
    model = getattr(transformers, model_cls)(config)
    bs = batch_size or DEFAULT_BATCH
    return KeywordCall(model, names), inputs(bs, names) if inputs is _text else inputs(bs), bs


def models():

    return [Model(n, Spec(source="huggingface", model=n), d, DEFAULT_BATCH)
            for n, (_, _, _, _, _, d) in MODELS.items()]



require = require_transformers   # what Library asks


class HuggingFace(Library):
    name = "huggingface"
    library = __name__


SOURCE = HuggingFace()

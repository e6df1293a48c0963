"""``--suite huggingface``: real transformers architectures built offline from their config classes.

Nothing is downloaded: each model is the library's own implementation, instantiated from its
configuration class with a tiny configuration (2 layers, hidden size 32-64) and random weights,
so a check runs on a CPU in seconds. Eight architectures are curated (``--list``); ``--models``
takes any other model class of the installed transformers too (``LlamaForCausalLM``,
``BartForConditionalGeneration``, ``ConvNextForImageClassification``, ...), its sizes shrunk
the same way. Names follow PyTorch's benchmark harness where it has the
model (``BertForMaskedLM``, ``MobileBertForMaskedLM``, ``T5Small``, ...). Needs the optional
extra: ``pip install 'minify-action[models]'``.
"""

from __future__ import annotations

from typing import Any, Callable

from bot import extra_hint
from bot.errors import UsageError
from bot.records import Spec
from bot.suites.source import Library, Model

EXTRA_HINT = extra_hint("models")
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


# Any other transformers model class is built the same way from its own config class: every size
# its config has shrunk to these (where the default is of the same type), dropouts off, per-stage
# lists of hierarchical vision models cut to one block per stage.
SHRINK = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
              intermediate_size=64, max_position_embeddings=64, d_model=32, d_kv=16, d_ff=64, num_layers=2,
              num_decoder_layers=2, num_heads=2, n_layer=2, n_embd=32, n_head=2, n_positions=64, dim=32, n_layers=2,
              n_heads=2, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
              encoder_ffn_dim=64, decoder_ffn_dim=64, ffn_dim=64, word_embed_proj_dim=32, head_dim=16,
              embedding_size=32, image_size=32, patch_size=8, num_channels=3, max_window_layers=2, num_labels=4,
              use_cache=False, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=0,
              window_size=4)
HIERARCHICAL = dict(image_size=64, embed_dim=16)


def model_class(name: str):
    """The transformers model class called ``name`` (one with a config class), or None."""
    transformers = require_transformers()
    try:
        cls = getattr(transformers, name)
    except (AttributeError, ImportError, RuntimeError):   # transformers imports lazily: a missing backend raises
        return None
    return cls if isinstance(cls, type) and getattr(cls, "config_class", None) is not None else None


def _tiny_config(cls):
    base = cls.config_class()
    d = base.to_dict()
    kw: dict[str, Any] = {k: v for k, v in SHRINK.items() if k in d and type(d[k]) is type(v)}
    kw.update({k: 0.0 for k, v in d.items() if isinstance(v, float) and ("dropout" in k or k.endswith("pdrop"))})
    for k, v in d.items():
        if isinstance(v, list) and v and all(type(x) is int for x in v):
            per_stage = {"depths": [1] * len(v), "num_heads": [2] * len(v),
                         "hidden_sizes": [16 * 2 ** i for i in range(len(v))]}
            if k in per_stage:
                kw[k] = per_stage[k]
    if "depths" in d:
        kw.update({k: v for k, v in HIERARCHICAL.items() if k in d})
    return cls.config_class(**kw)


def _generic(name: str, bs: int) -> tuple[Any, tuple]:
    """Any transformers model class, from a tiny config of its own config class, with random
    inputs of its main input (token ids, or images of the config's size)."""
    import torch

    cls = model_class(name)
    if cls is None:
        raise UsageError(f"unknown huggingface model {name!r}: not a model class of transformers "
                         f"{require_transformers().__version__}")
    try:
        config = _tiny_config(cls)
        model = cls(config)
    except Exception as exc:  # noqa: BLE001 - the library's own complaint, said as the user's error
        raise UsageError(f"cannot build {name} from a tiny {cls.config_class.__name__}: "
                         f"{type(exc).__name__}: {str(exc)[:300]}") from None
    if getattr(cls, "main_input_name", "input_ids") == "pixel_values":
        size = getattr(config, "image_size", 32)
        size = size if isinstance(size, int) else size[0]
        return KeywordCall(model, ("pixel_values",)), (torch.randn(bs, getattr(config, "num_channels", 3), size, size),)
    names = ("input_ids", "decoder_input_ids") if getattr(config, "is_encoder_decoder", False) else ("input_ids",)
    return KeywordCall(model, names), tuple(torch.randint(3, VOCAB, (bs, SEQ)) for _ in names)


def build_model(name: str, batch_size: int | None = None, **overrides) -> tuple[Any, tuple, int]:
    """The model and example inputs. ``overrides`` change the config (e.g. ``num_hidden_layers=18,
    hidden_act="relu"`` for a deep variant)."""
    transformers = require_transformers()
    bs = batch_size or DEFAULT_BATCH
    if name not in MODELS:
        return (*_generic(name, bs), bs)
    cfg_cls, model_cls, kwargs, names, inputs, _ = MODELS[name]
    config = getattr(transformers, cfg_cls)(**{**kwargs, **overrides})
    model = getattr(transformers, model_cls)(config)
    return KeywordCall(model, names), inputs(bs, names) if inputs is _text else inputs(bs), bs


def models(names: list[str] | None = None):
    """The curated architectures, and any other model class of transformers that ``names`` asks for
    (``--models LlamaForCausalLM``), built from a tiny config of its own."""
    out = [Model(n, Spec(source="huggingface", model=n), d, DEFAULT_BATCH) for n, (_, _, _, _, _, d) in MODELS.items()]
    for n in names or []:
        if n not in MODELS and model_class(n) is not None:
            out.append(Model(n, Spec(source="huggingface", model=n),
                             f"transformers' {n}, from a tiny {model_class(n).config_class.__name__}", DEFAULT_BATCH))
    return out


require = require_transformers   # what Library asks


class HuggingFace(Library):
    name = "huggingface"
    library = __name__

    def models(self, req):
        require_transformers()
        return models(req.names)


SOURCE = HuggingFace()

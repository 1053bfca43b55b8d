"""Tiny tokenizers and tiny random models for tests, benchmarks and smoke runs (offline, seconds).

Tokenizers, trained here on the packaged UDHR (:func:`corpus`) or on the
texts you pass:

* :func:`tiny_bpe` -- polymnesia's own byte-level BPE (:func:`~polymnesia.tokenizers.train_bpe`);
* :func:`tiny_sentencepiece` -- a SentencePiece BPE with byte fallback
  (Llama-2 / Mistral layout) or a SentencePiece Unigram (XLM-R layout),
  trained by ``sentencepiece`` and converted as ``from_pretrained`` does;
* :func:`tiny_tiktoken_bpe` -- a tiktoken-style byte-level BPE (Llama-3
  layout: the Llama-3 split regex, byte-level alphabet, ``ignore_merges``,
  ``<|begin_of_text|>``-style special tokens and a header/eot chat template).

Models: :func:`tiny_model` builds a random model of any architecture in
:data:`ARCHITECTURES` from its transformers config class, seeded, so the same
arguments and seed give the same weights (tests pin golden values on them);
:func:`save_tiny` writes model and tokenizer as a local HF folder that
``model.name_or_path`` can point at.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import torch

from polymnesia.data.sources.udhr import load_declaration
from polymnesia.errors import ConfigError
from polymnesia.models.io import save_model_and_tokenizer
from polymnesia.tokenizers.bpe import train_bpe
from polymnesia.tokenizers.spm import fast_from_proto, train_sentencepiece

Head = Literal["causal_lm", "masked_lm", "sequence", "token"]

#: architecture -> (config class, kind); decoders have a causal LM head, encoders a masked LM head
ARCHITECTURES: dict[str, tuple[str, str]] = {
    "mistral": ("MistralConfig", "decoder"),
    "llama": ("LlamaConfig", "decoder"),
    "qwen2": ("Qwen2Config", "decoder"),
    "gemma": ("GemmaConfig", "decoder"),
    "gemma2": ("Gemma2Config", "decoder"),
    "gpt2": ("GPT2Config", "decoder"),
    "xlm-roberta": ("XLMRobertaConfig", "encoder"),
}
DECODERS = tuple(a for a, (_, kind) in ARCHITECTURES.items() if kind == "decoder")
ENCODERS = tuple(a for a, (_, kind) in ARCHITECTURES.items() if kind == "encoder")

#: the split regex of tiktoken-style byte-level BPEs (Llama-3, cl100k): contractions,
#: letters with one leading non-letter, up to 3 digits, punctuation runs, newlines, spaces
TIKTOKEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_SPECIALS = (
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|eot_id|>",
)
LLAMA3_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' "
    "+ message['content'] | trim + '<|eot_id|>' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{% endif %}"
)
#: the Llama-2 / Mistral-instruct layout: system text folded into the first user turn
INST_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'system' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% else %}{{ ' ' + message['content'] + eos_token }}{% endif %}{% endfor %}"
)

#: the Gemma layout: ``user`` / ``model`` turns, system text folded into the first user turn
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{% set role = 'model' if message['role'] == 'assistant' else 'user' %}"
    "{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<start_of_turn>model\\n' }}{% endif %}"
)


def corpus(languages: Sequence[str] = ("en", "fr", "de"), repeat: int = 1) -> list[str]:
    """Every UDHR paragraph of ``languages`` (packaged with polymnesia), ``repeat`` times."""

    texts = [p["text"] for lang in languages for p in load_declaration(lang)["paragraphs"]]
    return texts * repeat


def tiny_bpe(
    texts: Sequence[str] | None = None, vocab_size: int = 300, *, repeat: int = 1, **kw: Any
) -> Any:
    """polymnesia's byte-level BPE trained on ``texts * repeat`` (default: :func:`corpus`)."""

    return train_bpe(list(texts if texts is not None else corpus()) * repeat, vocab_size, **kw)


def sentencepiece_settings(model_type: Literal["bpe", "unigram"]) -> dict[str, Any]:
    """Trainer options in the style of Llama-2 (BPE) and XLM-R (Unigram) tokenizers."""
    if model_type == "bpe":
        return dict(
            byte_fallback=True,
            split_digits=True,
            normalization_rule_name="identity",
            remove_extra_whitespaces=False,
            allow_whitespace_only_pieces=True,
            character_coverage=0.9995,
            unk_id=0,
            bos_id=1,
            eos_id=2,
            pad_id=-1,
        )
    return dict(character_coverage=0.9995, unk_id=0, bos_id=1, eos_id=2, pad_id=-1)


def tiny_sentencepiece(
    texts: Sequence[str] | None = None,
    vocab_size: int = 400,
    model_type: Literal["bpe", "unigram"] = "bpe",
    *,
    chat_template: str | None = None,
) -> tuple[Any, bytes]:
    """A SentencePiece tokenizer (transformers, converted) and its ``tokenizer.model`` bytes.

    BPE: byte fallback, Llama-2 settings, ``LlamaTokenizer`` (no pad token, as
    Llama-2). Unigram: XLM-R settings, ``XLMRobertaTokenizer``.
    """

    data = list(texts if texts is not None else corpus())
    model = train_sentencepiece(data, vocab_size, model_type, **sentencepiece_settings(model_type))
    tok = fast_from_proto(model)
    if chat_template is not None:
        tok.chat_template = chat_template
    return tok, model


def tiny_tiktoken_bpe(texts: Sequence[str] | None = None, vocab_size: int = 400) -> Any:
    """A tiktoken-style byte-level BPE (Llama-3 layout) trained with ``tokenizers``."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE(ignore_merges=True))
    backend.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(TIKTOKEN_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(LLAMA3_SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(list(texts if texts is not None else corpus()), trainer)
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token=LLAMA3_SPECIALS[0],
        eos_token=LLAMA3_SPECIALS[1],
        extra_special_tokens=list(LLAMA3_SPECIALS[2:]),
        model_max_length=2048,
    )
    tok.chat_template = LLAMA3_TEMPLATE
    return tok


def tiny_config(
    arch: str,
    vocab_size: int,
    *,
    hidden_size: int = 16,
    intermediate_size: int = 32,
    num_hidden_layers: int = 1,
    num_attention_heads: int = 2,
    num_key_value_heads: int = 1,
    **extra: Any,
) -> Any:
    """The transformers config of a tiny ``arch`` model; ``extra`` keys (None values dropped)
    go to the config class (``tie_word_embeddings``, ``pad_token_id``, ``num_labels``, ...)."""
    import transformers

    if arch not in ARCHITECTURES:
        raise ConfigError(
            f"unknown tiny architecture {arch!r}; accepted: {', '.join(ARCHITECTURES)}"
        )
    cls = getattr(transformers, ARCHITECTURES[arch][0])
    kw = {k: v for k, v in extra.items() if v is not None}
    head_dim = hidden_size // num_attention_heads
    if arch == "gpt2":
        if "max_position_embeddings" in kw:
            kw["n_positions"] = kw.pop("max_position_embeddings")
        kw.setdefault("bos_token_id", None)  # GPT-2's default 50256 is outside a tiny vocabulary
        kw.setdefault("eos_token_id", None)
        return cls(
            vocab_size=vocab_size,
            n_embd=hidden_size,
            n_inner=intermediate_size,
            n_layer=num_hidden_layers,
            n_head=num_attention_heads,
            **kw,
        )
    dims = dict(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
    )
    if arch == "xlm-roberta":
        kw.setdefault("type_vocab_size", 1)
        return cls(**dims, **kw)
    dims["num_key_value_heads"] = num_key_value_heads
    if arch == "mistral":
        kw.setdefault("sliding_window", None)
    if arch in ("gemma", "gemma2"):
        kw.setdefault("head_dim", head_dim)
    if arch == "gemma2":
        kw.setdefault("query_pre_attn_scalar", head_dim)
    return cls(**dims, **kw)


def _model_class(config: Any, head: Head) -> Any:
    import transformers

    auto: Any = {
        "causal_lm": transformers.AutoModelForCausalLM,
        "masked_lm": transformers.AutoModelForMaskedLM,
        "sequence": transformers.AutoModelForSequenceClassification,
        "token": transformers.AutoModelForTokenClassification,
    }[head]
    try:
        return auto._model_mapping[type(config)]
    except KeyError:
        raise ConfigError(f"{config.model_type} has no {head} model in transformers") from None


def tiny_model(
    arch: str = "mistral",
    vocab_size: int = 50,
    *,
    head: Head | None = None,
    seed: int = 0,
    **kw: Any,
) -> torch.nn.Module:
    """A random tiny ``arch`` model (weights drawn after ``torch.manual_seed(seed)``).

    ``head``: ``causal_lm`` (decoder default), ``masked_lm`` (encoder default),
    ``sequence`` or ``token`` classification (pass ``num_labels``). Other
    keywords go to :func:`tiny_config`.
    """
    config = tiny_config(arch, vocab_size, **kw)
    if head is None:
        head = "causal_lm" if ARCHITECTURES[arch][1] == "decoder" else "masked_lm"
    cls = _model_class(config, head)
    torch.manual_seed(seed)
    return cls(config)


def special_ids(tokenizer: Any) -> dict[str, int | None]:
    """``pad/bos/eos_token_id`` of ``tokenizer`` for a model config (pad falls back to EOS)."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    return {
        "pad_token_id": pad,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": tokenizer.eos_token_id,
    }


def save_tiny(
    folder: str | Path, arch: str, tokenizer: Any, *, head: Head | None = None, **kw: Any
) -> Path:
    """Save a tiny ``arch`` model sized for ``tokenizer`` and the tokenizer as an HF folder."""

    ids = {**special_ids(tokenizer), **kw}
    model = tiny_model(arch, len(tokenizer), head=head, **ids)
    path = Path(folder)
    save_model_and_tokenizer(model, tokenizer, path)
    return path

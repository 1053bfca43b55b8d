"""SentencePiece models: training with a base model's settings, reading and writing the proto.

Llama-2 and Mistral (v0.1) ship a SentencePiece BPE with byte fallback
(``tokenizer.model``) and its conversion to ``tokenizer.json``; XLM-R and T5
ship a SentencePiece Unigram. Vocabulary expansion (:mod:`.expand`) learns the
new-language vocabulary with the *same* trainer settings as the base model,
which the proto records in its ``trainer_spec`` and ``normalizer_spec``:
:func:`spec_settings` turns them back into ``SentencePieceTrainer`` options.

:func:`fast_from_proto` converts a proto to a transformers tokenizer the way
``from_pretrained`` does for a folder holding only ``tokenizer.model``
(transformers' own SentencePiece converter), with the class of the model
family: ``LlamaTokenizer`` for BPE with byte fallback, ``XLMRobertaTokenizer``
for Unigram (which shifts ids by one for fairseq's ``<s> <pad> </s> <unk>``).
"""

from __future__ import annotations

import io
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from polymnesia.errors import ConfigError, PolymnesiaError

ModelType = Literal["bpe", "unigram"]

#: trainer_spec fields that describe the corpus or the run, not the algorithm: never copied
_RUN_FIELDS = {
    "input",
    "input_format",
    "model_prefix",
    "vocab_size",
    "num_threads",
    "input_sentence_size",
    "shuffle_input_sentence",
    "seed_sentencepiece_size",
    "mining_sentence_size",
    "training_sentence_size",
    "pretokenization_delimiter",
}


def _pb() -> Any:
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError:  # pragma: no cover - depends on the environment
        raise PolymnesiaError(
            "SentencePiece tokenizers need the 'sentencepiece' and 'protobuf' packages; "
            "pip install sentencepiece protobuf"
        ) from None
    return sentencepiece_model_pb2


def parse_proto(model: bytes) -> Any:
    """The ``ModelProto`` of a serialized SentencePiece model."""
    proto = _pb().ModelProto()
    proto.ParseFromString(model)
    return proto


def train_sentencepiece(
    texts: Iterable[str], vocab_size: int, model_type: ModelType = "bpe", **settings: Any
) -> bytes:
    """Train a SentencePiece model in memory and return it serialized (``tokenizer.model`` bytes).

    ``settings`` are ``SentencePieceTrainer`` options (``byte_fallback``,
    ``character_coverage``, ``split_digits``, special-token ids, ...);
    ``hard_vocab_limit`` defaults to False so a small corpus gives a smaller
    vocabulary instead of an error. One thread, so the result is reproducible.
    """
    import sentencepiece as spm

    if isinstance(texts, str):
        raise ConfigError("train_sentencepiece needs an iterable of texts, got one string")
    if model_type not in ("bpe", "unigram"):
        raise ConfigError(
            f"SentencePiece model_type must be 'bpe' or 'unigram', got {model_type!r}"
        )
    options = {"hard_vocab_limit": False, "minloglevel": 2, **settings, "num_threads": 1}
    buf = io.BytesIO()
    try:
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(list(texts)),
            model_writer=buf,
            vocab_size=vocab_size,
            model_type=model_type,
            **options,
        )
    except (RuntimeError, OSError) as e:
        raise PolymnesiaError(
            f"SentencePiece training failed: {str(e).strip().splitlines()[-1]}"
        ) from None
    return buf.getvalue()


def spec_settings(model: bytes) -> dict[str, Any]:
    """Trainer options that reproduce how ``model`` was trained (corpus and run options left
    out).
    """
    proto = parse_proto(model)
    out: dict[str, Any] = {}
    for field, value in proto.trainer_spec.ListFields():
        if field.name in _RUN_FIELDS:
            continue
        if field.name == "model_type":
            out[field.name] = field.enum_type.values_by_number[value].name.lower()
        elif isinstance(value, (list, tuple)) or hasattr(value, "extend"):
            out[field.name] = ",".join(str(v) for v in value)
        else:
            out[field.name] = value
    norm = proto.normalizer_spec
    if norm.name:
        out["normalization_rule_name"] = norm.name
    for key in ("add_dummy_prefix", "remove_extra_whitespaces", "escape_whitespaces"):
        if norm.HasField(key):
            out[key] = getattr(norm, key)
    return out


def model_type_of(model: bytes) -> ModelType:
    kind = spec_settings(model).get("model_type", "unigram")
    if kind not in ("bpe", "unigram"):
        raise PolymnesiaError(f"SentencePiece model type {kind!r} is not supported (bpe, unigram)")
    return kind


def pieces(model: bytes) -> list[tuple[str, float, str]]:
    """``(piece, score, type)`` for every piece, in id order (type: NORMAL, BYTE, CONTROL, ...)."""
    proto = parse_proto(model)
    types = _pb().ModelProto.SentencePiece.Type
    return [(p.piece, p.score, types.Name(p.type)) for p in proto.pieces]


def append_pieces(model: bytes, new: Iterable[tuple[str, float]]) -> bytes:
    """``model`` with NORMAL pieces ``(piece, score)`` appended after every existing id."""
    proto = parse_proto(model)
    normal = _pb().ModelProto.SentencePiece.NORMAL
    for piece, score in new:
        proto.pieces.add(piece=piece, score=float(score), type=normal)
    proto.trainer_spec.vocab_size = len(proto.pieces)
    return bytes(proto.SerializeToString())


def encode_pieces(model: bytes, text: str) -> list[str]:
    """The pieces the ``sentencepiece`` library itself produces for ``text`` (the slow
    reference).
    """
    import sentencepiece as spm

    return list(spm.SentencePieceProcessor(model_proto=model).encode(text, out_type=str))


def fast_from_proto(model: bytes, **kwargs: Any) -> Any:
    """A transformers tokenizer converted from the proto, as ``from_pretrained`` converts it.

    BPE -> ``LlamaTokenizer`` (Llama-2 / Mistral layout), Unigram ->
    ``XLMRobertaTokenizer``; ``kwargs`` go to ``from_pretrained`` (e.g.
    ``model_max_length``).
    """
    from transformers import LlamaTokenizer, XLMRobertaTokenizer

    cls = LlamaTokenizer if model_type_of(model) == "bpe" else XLMRobertaTokenizer
    with tempfile.TemporaryDirectory(prefix="polymnesia-spm-") as tmp:
        (Path(tmp) / "tokenizer.model").write_bytes(model)
        return cls.from_pretrained(tmp, local_files_only=True, **kwargs)

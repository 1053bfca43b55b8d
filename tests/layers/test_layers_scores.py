"""Spectrum SNR on hand-computed spectra; streaming scans equal in-memory scans."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from layers_helpers import save, tiny_mistral

from polymnesia.errors import PolymnesiaError
from polymnesia.layers.scores import (
    iqr_sigma,
    most_changed_scan,
    mp_threshold,
    random_scores,
    relative_change,
    spectrum_scan,
    spectrum_snr,
)
from polymnesia.layers.stream import iter_tensors


def test_iqr_sigma_linear_quantiles() -> None:
    # sorted [1, 2, 4, 8]: q25 = 1.75, q75 = 5 -> IQR 3.25
    assert iqr_sigma(torch.tensor([8.0, 4.0, 2.0, 1.0])) == pytest.approx(3.25 / 1.349)


def test_mp_threshold_uses_min_over_max() -> None:
    assert mp_threshold(2.0, 4, 16) == pytest.approx(2.0 * 1.5)
    assert mp_threshold(2.0, 16, 4) == pytest.approx(2.0 * 1.5)


def test_snr_square_diagonal() -> None:
    # S = [10, 1, 1, 1]: IQR = 3.25 - 1 = 2.25, threshold = 2 * 2.25/1.349 = 3.336
    # signal 10, noise 3 -> SNR 10/3, divided by the largest singular value 10 -> 1/3
    W = torch.diag(torch.tensor([10.0, 1.0, 1.0, 1.0]))
    assert spectrum_snr(W) == pytest.approx(1 / 3, rel=1e-6)


def test_snr_rectangular_rotated() -> None:
    # S = [8, 4, 2, 1] in a 4 x 8 matrix (beta 0.5): threshold 3.25/1.349 * (1 + sqrt(.5)) = 4.11
    # signal 8, noise 7 -> (8/7)/8 = 1/7; rotations do not change singular values
    g = torch.Generator().manual_seed(0)
    U, _ = torch.linalg.qr(torch.randn(4, 4, generator=g, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))
    D = torch.zeros(4, 8, dtype=torch.float64)
    D[range(4), range(4)] = torch.tensor([8.0, 4.0, 2.0, 1.0], dtype=torch.float64)
    W = (U @ D @ V.T).to(torch.bfloat16)  # any dtype: the SVD runs in float32
    assert spectrum_snr(W) == pytest.approx(1 / 7, rel=0.05)
    assert spectrum_snr((U @ D @ V.T).float()) == pytest.approx(1 / 7, rel=1e-5)


def test_snr_flat_spectrum_is_inf_as_in_reference() -> None:
    assert math.isinf(spectrum_snr(torch.eye(5)))


def test_relative_change() -> None:
    a = torch.tensor([[3.0, 0.0], [0.0, 4.0]])  # ||a|| = 5
    assert relative_change(a, a + torch.tensor([[0.0, 1.0], [0.0, 0.0]])) == pytest.approx(0.2)
    assert relative_change(a, a) == 0.0


def test_random_scores_deterministic_and_order_free() -> None:
    a = random_scores(["b", "a", "c"], seed=3)
    assert a == random_scores(["c", "a", "b"], seed=3)
    assert a != random_scores(["a", "b", "c"], seed=4)
    assert all(0 <= v < 1 for v in a.values())


@pytest.mark.parametrize("shard", [None, "8KB"])
def test_streaming_scan_equals_in_memory(tmp_path: Path, shard: str | None) -> None:
    model = tiny_mistral()
    folder = save(model, tmp_path / "m", shard)
    if shard:
        assert len(list(folder.glob("*.safetensors"))) > 1
    streamed = spectrum_scan(folder)
    in_memory = spectrum_scan(model)
    assert streamed.keys() == in_memory.keys()
    assert all(n.endswith(".weight") for n in streamed)  # 2-D weights only, norms skipped
    assert "model.layers.2.self_attn.q_proj.weight" in streamed
    assert not any("norm" in n for n in streamed)
    assert "model.embed_tokens.weight" not in streamed and "lm_head.weight" not in streamed
    assert "lm_head.weight" in spectrum_scan(folder, include_embeddings=True)
    for n in streamed:
        assert streamed[n] == pytest.approx(in_memory[n], rel=1e-6), n


def test_iter_tensors_pattern_and_order(tmp_path: Path) -> None:
    folder = save(tiny_mistral(), tmp_path / "m")
    names = [n for n, _ in iter_tensors(folder, pattern=r"q_proj")]
    assert names == [f"model.layers.{i}.self_attn.q_proj.weight" for i in range(3)]


def test_most_changed_finds_the_edited_matrix(tmp_path: Path) -> None:
    base = tiny_mistral()
    save(base, tmp_path / "base")
    with torch.no_grad():
        base.model.layers[1].self_attn.k_proj.weight.mul_(3.0)  # relative change exactly 2
    save(base, tmp_path / "tuned")
    scores = most_changed_scan(tmp_path / "base", tmp_path / "tuned")
    assert scores["model.layers.1.self_attn.k_proj.weight"] == pytest.approx(2.0)
    assert sum(v > 0 for v in scores.values()) == 1
    assert most_changed_scan(tmp_path / "base", base) == pytest.approx(scores)


def test_missing_folder_one_line(tmp_path: Path) -> None:
    with pytest.raises(PolymnesiaError, match="no \\*.safetensors"):
        spectrum_scan(tmp_path)
    with pytest.raises(PolymnesiaError, match="not found"):
        spectrum_scan(tmp_path / "nope")


def test_shape_mismatch_named(tmp_path: Path) -> None:
    save(tiny_mistral(), tmp_path / "a")
    other = tiny_mistral()
    other.resize_token_embeddings(48, mean_resizing=False)
    save(other, tmp_path / "b")
    with pytest.raises(PolymnesiaError, match="lm_head.weight has shape \\(40, 16\\)"):
        most_changed_scan(tmp_path / "a", tmp_path / "b")

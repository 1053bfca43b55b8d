from pathlib import Path

import numpy as np
import pytest

from polymnesia.continual.matrix import (
    compose_independent,
    compose_joint,
    save_matrix,
    sequential_matrix,
)
from polymnesia.errors import DataError
from polymnesia.metrics.continual import cbt, cft
from polymnesia.results import Score

CROSS = {  # cross[a][j]: model trained on a, scored on j
    "a": {"a": 0.9, "b": 0.3, "c": 0.2},
    "b": {"a": 0.4, "b": 0.8, "c": 0.5},
    "c": {"a": 0.1, "b": 0.6, "c": 0.7},
}


def test_compose_independent_by_hand() -> None:
    R = compose_independent(CROSS, ["b", "a", "c"])
    expected = np.array(
        [
            [0.8, 0.4, 0.5],  # after b: b own; a, c with b's model
            [0.8, 0.9, 0.2],  # after a: b, a own; c with a's model
            [0.8, 0.9, 0.7],
        ]
    )
    np.testing.assert_allclose(R, expected)
    assert cbt(R) == 0.0  # own models never change: no forgetting
    assert cft(R) == pytest.approx(((0.4 + 0.5) / 2 + 0.2) / 2)


def test_compose_joint_repeats_the_row() -> None:
    R = compose_joint({"a": 0.5, "b": 0.7}, ["b", "a"])
    np.testing.assert_allclose(R, [[0.7, 0.5], [0.7, 0.5]])


def _s(step: int, lang: str, v: float) -> Score:
    return Score(model="VANILLA", lang=lang, metric="macro_f1", value=v, step=step, setting="o")


def test_sequential_matrix_from_scores_and_missing_cells() -> None:
    scores = [_s(i, lang, 10 * i + j) for i in range(2) for j, lang in enumerate(["x", "y"])]
    np.testing.assert_allclose(sequential_matrix(scores, ["y", "x"]), [[1, 0], [11, 10]])
    with pytest.raises(DataError, match="misses 1 of 4"):
        sequential_matrix(scores[:-1], ["x", "y"])


def test_save_matrix_csv_and_npy(tmp_path: Path) -> None:
    R = np.array([[0.5, 0.25], [0.125, 1.0]])
    csv_path, npy_path = save_matrix(R, ["en", "fr"], tmp_path / "R_x")
    np.testing.assert_array_equal(np.load(npy_path), R)
    lines = csv_path.read_text().splitlines()
    assert lines[0] == "step,trained,en,fr" and lines[2] == "1,fr,0.125000,1.000000"

"""Bootstrap replicates of R from item statistics: one draw per language, shared by every entry."""

import numpy as np
import pytest

from polymnesia.continual.resample import (
    Replicates,
    best_of,
    draw_items,
    replicate,
    replicate_matrix,
)
from polymnesia.errors import DataError
from polymnesia.metrics import continual as cm
from polymnesia.metrics.uncertainty import accuracy_statistic


def _acc(correct: list[int]):  # type: ignore[no-untyped-def]
    return accuracy_statistic(np.array(correct), np.ones(len(correct), dtype=int))


def test_draws_depend_only_on_seed_language_and_size() -> None:
    a = draw_items({"en": 5, "ru": 4}, 7, seed=3)
    b = draw_items({"ru": 4, "de": 9, "en": 5}, 7, seed=3)
    np.testing.assert_array_equal(a["en"], b["en"])
    np.testing.assert_array_equal(a["ru"], b["ru"])
    assert a["en"].shape == (7, 5) and a["en"].max() < 5
    assert not np.array_equal(draw_items({"en": 5}, 7, seed=4)["en"], a["en"])


def test_every_entry_of_a_column_uses_the_language_draw() -> None:
    # column en: step 0 gets items [1,1,0,0], step 1 [1,0,0,0]; column ru: [1,1,1] then [0,1,1]
    en0, en1, ru0, ru1 = _acc([1, 1, 0, 0]), _acc([1, 0, 0, 0]), _acc([1, 1, 1]), _acc([0, 1, 1])
    draws = {"en": np.array([[0, 0, 1, 1], [2, 3, 2, 3]]), "ru": np.array([[0, 0, 0], [1, 2, 1]])}
    reps = replicate_matrix([[en0, ru0], [en1, ru1]], ["en", "ru"], draws)
    assert reps.shape == (2, 2, 2)
    # replicate 0: en items 0,0,1,1 -> step 0: 1.0, step 1: 0.5; ru items 0,0,0 -> 1.0 and 0.0
    np.testing.assert_allclose(reps[0], [[1.0, 1.0], [0.5, 0.0]])
    # replicate 1: en items 2,3,2,3 -> 0 and 0; ru items 1,2,1 -> 1 and 1
    np.testing.assert_allclose(reps[1], [[0.0, 1.0], [0.0, 1.0]])
    # CBT on replicate 0 by hand: R[1,0] - R[0,0] = 0.5 - 1.0
    point = {"o": np.array([[0.5, 1.0], [0.25, 2 / 3]])}
    r = replicate(lambda rs: cm.cbt(rs["o"]), point, {"o": reps}, n=7)
    np.testing.assert_allclose(r.values, [-0.5, 0.0])
    assert r.point == pytest.approx(0.25 - 0.5)


def test_a_repeated_statistic_is_resampled_once_and_sizes_are_checked() -> None:
    row = _acc([1, 0, 1])
    draws = {"en": np.array([[0, 1, 2]]), "ru": np.array([[0, 1, 2]])}
    reps = replicate_matrix([[row, row], [row, row]], ["en", "ru"], draws)
    assert np.all(reps == pytest.approx(2 / 3))
    with pytest.raises(DataError, match="3 items in one entry of R, 2 in the draw"):
        replicate_matrix([[row]], ["en"], {"en": np.array([[0, 1]])})


def test_interval_paired_test_and_best_of() -> None:
    a = Replicates(0.3, np.linspace(0.1, 0.5, 101), n=50)
    iv = a.interval()
    assert iv.estimate == 0.3 and iv.low == pytest.approx(0.11) and iv.high == pytest.approx(0.49)
    b = Replicates(0.1, np.full(101, 0.1), n=50)
    d = (a - b).test()
    assert d.effect == pytest.approx(0.2)
    # d <= 0 in 1 of 101 replicates (0.1 - 0.1), d >= 0 in all: p = 2 * 1/101
    assert d.p_value == pytest.approx(2 / 101)
    best = best_of([a, b])
    assert best.point == 0.3 and best.values[0] == pytest.approx(0.1)
    assert not Replicates(0.3, np.array([]), 0).interval().has_spread

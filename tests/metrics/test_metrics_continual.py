"""Continual-learning metrics against a 4x4 example worked out by hand below."""

import numpy as np
import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics import METRICS
from polymnesia.metrics.continual import (
    average_learned,
    average_relative_score,
    bwt_gem,
    cbt,
    cft,
    forgetting_from_best,
    forgetting_from_first,
    fwt_vs_untrained,
    mbt,
    mft,
    multi_hop_by_language,
    performance_shift,
    performance_shift_steps,
    to_learning_order,
)

# Rows: after steps 1..4; columns: languages in learning order.
R = np.array(
    [
        [60, 20, 10, 30],
        [50, 80, 40, 20],
        [40, 70, 90, 50],
        [30, 60, 80, 70],
    ],
    dtype=float,
)
# P: [60, (50+80)/2, (40+70+90)/3, (30+60+80+70)/4]
P = np.array([60.0, 65.0, 200 / 3, 60.0])


def test_average_learned_by_hand():
    np.testing.assert_allclose(average_learned(R), P)


def test_cft_by_hand():
    # Xbar_1 = mean(20, 10, 30) = 20; Xbar_2 = mean(40, 20) = 30; Xbar_3 = 50
    assert cft(R) == pytest.approx((20 + 30 + 50) / 3)


def test_cbt_by_hand_both_readings():
    # last row: (30-60) + (60-80) + (80-90) = -60, over T-1 = 3
    assert cbt(R) == pytest.approx(-20.0)
    # literal 1-based R_{T-1,i}: row 3 (0-based 2): (40-60) + (70-80) + (90-90) = -30
    assert cbt(R, row="paper") == pytest.approx(-10.0)
    with pytest.raises(PolymnesiaError, match="'last' or 'paper'"):
        cbt(R, row="first")  # type: ignore[arg-type]


def _cft_one_based(M):
    T = len(M)
    r = lambda i, j: M[i - 1][j - 1]  # noqa: E731
    xbar = [sum(r(i, j) for j in range(i + 1, T + 1)) / (T - i) for i in range(1, T)]
    return sum(xbar) / (T - 1)


def _cbt_one_based_last(M):
    T = len(M)
    r = lambda i, j: M[i - 1][j - 1]  # noqa: E731
    return sum(r(T, i) - r(i, i) for i in range(1, T)) / (T - 1)


def test_zero_based_matches_one_based_transcription():
    rng = np.random.default_rng(0)
    for T in (2, 3, 6):
        M = rng.uniform(0, 1, size=(T, T))
        assert cft(M) == pytest.approx(_cft_one_based(M.tolist()))
        assert cbt(M) == pytest.approx(_cbt_one_based_last(M.tolist()))


def test_gem_variants_by_hand():
    assert bwt_gem(R) == pytest.approx(-20.0)
    assert forgetting_from_first(R) == pytest.approx(20.0)
    # best since learned: 60-30, 80-60, 90-80
    assert forgetting_from_best(R) == pytest.approx(20.0)
    # R[0,1]=20-10, R[1,2]=40-10, R[2,3]=50-10
    assert fwt_vs_untrained(R, [10, 10, 10, 10]) == pytest.approx(80 / 3)


def test_forgetting_from_best_counts_zero_shot_rows_only_when_asked():
    M = np.array([[50, 95, 0], [40, 60, 0], [30, 50, 0]], dtype=float)
    assert forgetting_from_best(M) == pytest.approx(((50 - 30) + (60 - 50)) / 2)
    assert forgetting_from_best(M, since_learned=False) == pytest.approx(
        ((50 - 30) + (95 - 50)) / 2
    )


def test_performance_shift_steps_by_hand():
    np.testing.assert_allclose(
        performance_shift_steps(R), [np.nan, 60 - 65, 65 - 200 / 3, 200 / 3 - 60]
    )
    # previously learned only: 60-50, mean(50,80)-mean(40,70), mean(40,70,90)-mean(30,60,80)
    np.testing.assert_allclose(performance_shift_steps(R, include_new=False), [np.nan, 10, 10, 10])


def test_multi_hop_by_hand():
    nan = np.nan
    expected_mft = [[nan, nan], [5, 20 / 3], [5 / 3, -5], [-20 / 3, nan]]
    expected_mbt = [[nan, nan], [5, nan], [5 / 3, 20 / 3], [-20 / 3, -5]]
    np.testing.assert_allclose(mft(R, 1), expected_mft)
    np.testing.assert_allclose(mbt(R, 1), expected_mbt)
    with pytest.raises(PolymnesiaError, match="hops"):
        mft(R, -1)


# Two orders over languages a, b; R columns always in canonical order [a, b].
ORDERS = [["a", "b"], ["b", "a"]]
RS = [np.array([[0.5, 0.1], [0.4, 0.7]]), np.array([[0.2, 0.6], [0.9, 0.5]])]


def test_to_learning_order_permutes_columns():
    np.testing.assert_allclose(
        to_learning_order(RS[1], ["b", "a"], ["a", "b"]), [[0.6, 0.2], [0.5, 0.9]]
    )
    with pytest.raises(PolymnesiaError, match="same languages"):
        to_learning_order(RS[1], ["b", "a"], ["a", "c"])


def test_performance_shift_over_orders():
    # order 1: b learned at step 2: 0.5 - mean(0.4, 0.7); order 2: a: 0.6 - mean(0.5, 0.9)
    out = performance_shift(ORDERS, RS, columns=["a", "b"])
    assert out["b"] == pytest.approx(-0.05)
    assert out["a"] == pytest.approx(-0.1)


def test_multi_hop_by_language_averages_orders():
    out = multi_hop_by_language(ORDERS, RS, hops=0, kind="mft", columns=["a", "b"])
    np.testing.assert_allclose(out["a"], [0.1])
    np.testing.assert_allclose(out["b"], [0.05])
    with pytest.raises(PolymnesiaError, match="one R per order"):
        multi_hop_by_language(ORDERS, RS[:1], hops=0)


def test_average_relative_score():
    assert average_relative_score({"en": 80, "de": 90}, {"en": 40, "de": 100}) == pytest.approx(
        1.45
    )
    assert average_relative_score([80, 90], [40, 100]) == pytest.approx(1.45)
    with pytest.raises(PolymnesiaError, match="same languages"):
        average_relative_score({"en": 1}, {"de": 1})


def test_bad_shapes_raise_one_line():
    with pytest.raises(PolymnesiaError, match="square"):
        cft(np.ones((2, 3)))
    with pytest.raises(PolymnesiaError, match="at least 2"):
        cbt(np.ones((1, 1)))
    with pytest.raises(PolymnesiaError, match="untrained score"):
        fwt_vs_untrained(R, [1, 2])


def test_registered():
    for name in (
        "cft",
        "cbt",
        "mft",
        "mbt",
        "bwt_gem",
        "performance_shift",
        "average_relative_score",
    ):
        assert name in METRICS
    assert METRICS.get("forgetting_from_best").higher_is_better is False

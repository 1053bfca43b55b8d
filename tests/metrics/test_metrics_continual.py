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
    forgetting_after_learning,
    forgetting_best_before_final,
    forgetting_best_since_learned,
    forgetting_mammoth,
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
    assert forgetting_after_learning(R) == pytest.approx(20.0)
    # best since learned: 60-30, 80-60, 90-80
    assert forgetting_best_since_learned(R) == pytest.approx(20.0)
    assert forgetting_mammoth(R) == pytest.approx(20.0)
    # R[0,1]=20-10, R[1,2]=40-10, R[2,3]=50-10
    assert fwt_vs_untrained(R, [10, 10, 10, 10]) == pytest.approx(80 / 3)


def test_forgetting_variants_differ_in_the_rows_of_the_max():
    M = np.array([[50, 95, 0], [40, 60, 0], [30, 50, 0]], dtype=float)
    assert forgetting_best_since_learned(M) == pytest.approx(((50 - 30) + (60 - 50)) / 2)
    # Chaudhry et al. 2018: rows 0..T-2, the zero-shot 95 of language 1 counts
    assert forgetting_best_before_final(M) == pytest.approx(((50 - 30) + (95 - 50)) / 2)
    assert forgetting_after_learning(M) == pytest.approx(((50 - 30) + (60 - 50)) / 2)
    assert forgetting_mammoth(M) == pytest.approx(((50 - 30) + (60 - 50)) / 2)


# 5 languages; per-language "best since learned, final excluded" minus final:
# a: 0.80-0.70 = 0.10, b: 0.75-0.70 = 0.05, c: 0.60-0.63 = -0.03 (c ends at its best),
# d: 0.85-0.70 = 0.15 -> mean 0.27/4 = 0.0675. mammoth includes the final row in
# the max, so c's term is 0 -> 0.30/4 = 0.075 (the numbers quoted in issue 11).
R5 = np.array(
    [
        [0.80, 0.20, 0.10, 0.10, 0.05],
        [0.78, 0.75, 0.15, 0.10, 0.05],
        [0.75, 0.72, 0.60, 0.20, 0.10],
        [0.72, 0.71, 0.55, 0.85, 0.20],
        [0.70, 0.70, 0.63, 0.70, 0.90],
    ]
)


def test_mammoth_forgetting_includes_the_final_row_on_a_5x5_matrix():
    assert forgetting_best_since_learned(R5) == pytest.approx(0.0675)
    assert forgetting_mammoth(R5) == pytest.approx(0.075)
    assert forgetting_best_before_final(R5) == pytest.approx(0.0675)
    assert forgetting_after_learning(R5) == pytest.approx((0.10 + 0.05 - 0.03 + 0.15) / 4)
    # mammoth's per-language terms are never negative: its value is >= the others
    assert forgetting_mammoth(-R5) >= 0


def test_performance_shift_steps_by_hand():
    np.testing.assert_allclose(
        performance_shift_steps(R), [np.nan, 60 - 65, 65 - 200 / 3, 200 / 3 - 60]
    )
    # previously learned only: 60-50, mean(50,80)-mean(40,70), mean(40,70,90)-mean(30,60,80)
    np.testing.assert_allclose(performance_shift_steps(R, shift="previous"), [np.nan, 10, 10, 10])
    # the literal reading (-5, -5/3, 20/3) and this one disagree in sign at steps 2 and 3
    lit, prev = performance_shift_steps(R)[1:], performance_shift_steps(R, "previous")[1:]
    np.testing.assert_array_equal(np.sign(lit) == np.sign(prev), [False, False, True])
    with pytest.raises(PolymnesiaError, match="shift must be one of literal, previous"):
        performance_shift_steps(R, "both")


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
    # previous languages only: order 1: 0.5 - 0.4; order 2: 0.6 - 0.5
    prev = performance_shift(ORDERS, RS, columns=["a", "b"], shift="previous")
    assert prev == pytest.approx({"a": 0.1, "b": 0.1})


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
    for name in (
        "forgetting_after_learning",
        "forgetting_best_since_learned",
        "forgetting_best_before_final",
        "forgetting_mammoth",
    ):
        assert METRICS.get(name).higher_is_better is False

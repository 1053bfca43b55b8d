import numpy as np
import pytest

from polymnesia.experiments.lifelong.evidence import metric_replicates
from polymnesia.experiments.lifelong.report import table1
from polymnesia.experiments.lifelong.results import (
    Arm,
    arm_metrics,
    average_curve,
    final_by_language,
)

R1 = np.array([[0.6, 0.2], [0.4, 0.8]])  # order a, b
R2 = np.array([[0.5, 0.1], [0.7, 0.3]])  # order b, a (columns b, a)
ORDERS = {"o1": ["en", "ru"], "o2": ["ru", "en"]}


def _arm() -> Arm:
    return Arm("VANILLA", "vanilla", None, 10, 10, {"o1": R1, "o2": R2})


def test_metrics_are_means_over_orders_by_hand() -> None:
    m = arm_metrics(_arm(), ORDERS, {"en": 0.1, "ru": 0.05})
    assert m["final"] == pytest.approx(((0.4 + 0.8) / 2 + (0.7 + 0.3) / 2) / 2)
    assert m["cbt"] == pytest.approx(((0.4 - 0.6) + (0.7 - 0.5)) / 2)  # R[T-1,0] - R[0,0] per order
    assert m["cbt_paper_row"] == pytest.approx(
        0.0
    )  # literal row T-1 (0-based T-2 = 0): R[0,0]-R[0,0]
    assert m["cft"] == pytest.approx((0.2 + 0.1) / 2)
    # best from learning to the step before last (row 0 here) minus final, per order
    assert m["forgetting_best_since_learned"] == pytest.approx(((0.6 - 0.4) + (0.5 - 0.7)) / 2)
    assert m["forgetting_after_learning"] == pytest.approx(-m["cbt"])
    # mammoth: the final row is in the max, so order 2's 0.7 > 0.5 gives 0
    assert m["forgetting_mammoth"] == pytest.approx(((0.6 - 0.4) + 0.0) / 2)
    assert m["forgetting_best_before_final"] == pytest.approx(m["forgetting_best_since_learned"])
    assert m["fwt_vs_untrained"] == pytest.approx(((0.2 - 0.05) + (0.1 - 0.1)) / 2)


def test_final_by_language_and_curve() -> None:
    final = final_by_language(_arm(), ORDERS)
    assert final == {"en": pytest.approx((0.4 + 0.3) / 2), "ru": pytest.approx((0.8 + 0.7) / 2)}
    np.testing.assert_allclose(average_curve(_arm()), [(0.6 + 0.5) / 2, (0.6 + 0.5) / 2])


def test_table1_layout_has_vitality_columns() -> None:
    arms = [_arm()]
    m = {a.label: metric_replicates(a, ORDERS, {}, None) for a in arms}
    t = table1(arms, ORDERS, m)
    assert t.columns == ["Method", "Params (M)", "F1 (%)", "Low", "Mid", "High"]
    row = t.rows[0]
    assert row[0] == "VANILLA" and row[2] == pytest.approx(55.0) and np.isnan(row[3])
    assert row[5] == pytest.approx(55.0)  # en (5) and ru (4) are both High
    assert row[1] == "0.0000"  # 10 parameters, in millions

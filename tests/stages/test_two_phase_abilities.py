"""EA/MA from per-document values: hand-checkable scores, intervals and paired differences."""

from __future__ import annotations

import numpy as np
import pytest

from polymnesia.experiments.two_phase.abilities import (
    Ability,
    ability_interval,
    combined,
    paired_difference,
)


def test_score_is_the_mean_of_task_means() -> None:
    a = Ability({"t1": np.array([1.0, 0.0, 1.0, 1.0]), "t2": np.array([0.0, 0.0])})
    assert a.score() == pytest.approx((0.75 + 0.0) / 2)
    assert a.score({"t1": 3.0, "t2": 1.0}) == pytest.approx(0.75 * 0.75)


def test_identical_models_differ_by_exactly_zero() -> None:
    a = Ability({"t": np.array([1.0, 0.0, 1.0, 0.0, 1.0])})
    t = paired_difference(a, a)
    assert (t.effect, t.low, t.high, t.p_value) == (0.0, 0.0, 0.0, 1.0)


def test_a_model_right_everywhere_beats_one_wrong_everywhere() -> None:
    a = Ability({"t": np.ones(30)})
    b = Ability({"t": np.zeros(30)})
    t = paired_difference(a, b)
    assert t.effect == 1.0 and t.low == 1.0 and t.p_value == 0.0


def test_pairing_removes_the_shared_difficulty() -> None:
    rng = np.random.default_rng(0)
    hard = rng.random(200)  # per-document difficulty shared by both models
    a = Ability({"t": hard + 0.05})
    b = Ability({"t": hard})
    paired = paired_difference(a, b)
    alone = ability_interval(a)
    assert paired.effect == pytest.approx(0.05)
    assert paired.high - paired.low < 1e-9 < alone.high - alone.low


def test_combined_weights_ea_and_ma_equally() -> None:
    ea = Ability({"e1": np.array([1.0]), "e2": np.array([0.0])})
    ma = Ability({"m": np.array([1.0, 1.0])})
    ab, w = combined(ea, ma)
    assert ab.score(w) == pytest.approx((0.5 + 1.0) / 2)


def test_layer_curves_draw_a_shared_model_once_in_layer_order() -> None:
    from polymnesia.experiments.two_phase.figures import layer_curves
    from polymnesia.results import Score

    def s(model: str, layer: int, v: float) -> Score:
        return Score(model=model, lang="en", metric="layer_covariance_drift", value=v, step=layer,
                     extra={"reference": "P1 en"})  # fmt: skip

    layer = [s("base", 1, 2.0), s("base", 0, 1.0), s("P2 a", 0, 0.5), s("base", 0, 1.0)]
    curves = layer_curves(layer)
    assert curves["base vs P1 en"] == ([0.0, 1.0], [1.0, 2.0])
    assert curves["P2 a vs P1 en"] == ([0.0], [0.5])

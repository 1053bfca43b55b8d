"""EA/MA from the harness stages' per-document items: hand-checkable scores, intervals and
paired differences with the shared bootstraps."""

from __future__ import annotations

import numpy as np
import pytest

from polymnesia.errors import DataError
from polymnesia.experiments.two_phase.abilities import (
    Ability,
    ability,
    ability_interval,
    combined,
    paired_difference,
)
from polymnesia.harness.items import samples_to_items
from polymnesia.items import ItemSet
from polymnesia.metrics.uncertainty import mean_statistic, stratified_bootstrap_ci


def _docs(task: str, values: list[float] | np.ndarray, column: str = "acc") -> ItemSet:
    vals = [float(v) for v in values]
    return ItemSet(
        "m", "en", "docs", [f"d{i}" for i in range(len(vals))], {column: vals}, task=task
    )


def _ab(**tasks: list[float] | np.ndarray) -> Ability:
    return Ability({t: _docs(t, v) for t, v in tasks.items()})


def test_score_is_the_mean_of_task_means() -> None:
    a = _ab(t1=[1.0, 0.0, 1.0, 1.0], t2=[0.0, 0.0])
    assert a.score() == pytest.approx((0.75 + 0.0) / 2)
    w = Ability(a.items, {"t1": 3.0, "t2": 1.0})
    assert w.score() == pytest.approx(0.75 * 0.75)


def test_identical_models_differ_by_exactly_zero() -> None:
    a = _ab(t=[1.0, 0.0, 1.0, 0.0, 1.0])
    t = paired_difference(a, a)
    assert (t.effect, t.low, t.high, t.p_value) == (0.0, 0.0, 0.0, 1.0)


def test_a_model_right_everywhere_beats_one_wrong_everywhere() -> None:
    t = paired_difference(_ab(t=np.ones(30)), _ab(t=np.zeros(30)))
    assert t.effect == 1.0 and t.low == 1.0 and t.p_value == 0.0


def test_pairing_removes_the_shared_difficulty() -> None:
    rng = np.random.default_rng(0)
    hard = rng.random(200)  # per-document difficulty shared by both models
    a, b = _ab(t=hard + 0.05), _ab(t=hard)
    paired = paired_difference(a, b)
    alone = ability_interval(a)
    assert paired.effect == pytest.approx(0.05)
    assert paired.high - paired.low < 1e-9 < alone.high - alone.low


def test_pairs_documents_by_id_not_by_position() -> None:
    a = Ability(
        {"t": ItemSet("a", "en", "docs", ["x", "y", "z"], {"acc": [1.0, 0.0, 0.0]}, task="t")}
    )
    b = Ability(
        {"t": ItemSet("b", "en", "docs", ["z", "y", "x"], {"acc": [0.0, 0.0, 1.0]}, task="t")}
    )
    t = paired_difference(a, b)  # the same answers on the same documents, listed in two orders
    assert (t.effect, t.low, t.high) == (0.0, 0.0, 0.0)


def test_combined_weights_ea_and_ma_equally() -> None:
    ea = _ab(e1=[1.0], e2=[0.0])
    ma = _ab(m=[1.0, 1.0])
    assert combined(ea, ma).score() == pytest.approx((0.5 + 1.0) / 2)


def test_the_interval_is_the_shared_stratified_bootstrap_weighted() -> None:
    # equal weights: exactly metrics.uncertainty's stratified bootstrap over the tasks
    rng = np.random.default_rng(1)
    t1, t2 = rng.integers(0, 2, 40).astype(float), rng.integers(0, 2, 25).astype(float)
    got = ability_interval(_ab(t1=t1, t2=t2), n_resamples=300, seed=4)
    want = stratified_bootstrap_ci(
        [mean_statistic(t1), mean_statistic(t2)], n_resamples=300, seed=4
    )
    assert (got.estimate, got.low, got.high, got.n) == pytest.approx(
        (want.estimate, want.low, want.high, 65)
    )
    # weighted (Combined): the estimate is the weighted mean and lies inside its interval
    ab = combined(_ab(e=t1), _ab(m1=t2, m2=t2[::-1]))
    iv = ability_interval(ab, n_resamples=300, seed=4)
    assert iv.estimate == pytest.approx(0.5 * t1.mean() + 0.5 * t2.mean())
    assert iv.low <= iv.estimate <= iv.high


def test_translation_tasks_count_their_sentence_chrf() -> None:
    # lm-eval keeps chrF per document as a (reference, prediction) pair and aggregates it
    # over the corpus; the items keep each document's sentence chrF / 100 instead
    rows = [
        {
            "doc_id": 0,
            "doc_hash": "h0",
            "filter": "none",
            "metrics": ["chrf"],
            "chrf": ["le chat", "le chat"],
        },
        {
            "doc_id": 1,
            "doc_hash": "h1",
            "filter": "none",
            "metrics": ["chrf"],
            "chrf": ["le chien", "un oiseau"],
        },
    ]
    results = {
        "results": {"poly_translate_fr": {"chrf,none": 40.0}},
        "samples": {"poly_translate_fr": rows},
    }
    (items,) = samples_to_items(results, "m")
    assert "chrf" not in items.columns and items.columns["chrf_sentence"][0] == pytest.approx(1.0)
    a = ability([items], ["poly_translate_fr"], "m")
    assert 0 <= a.score() < 1 and a.score() == pytest.approx(
        np.mean(items.columns["chrf_sentence"])
    )


def test_a_task_without_items_is_one_line() -> None:
    with pytest.raises(DataError, match="no per-document items for t2"):
        ability([_docs("t1", [1.0])], ["t1", "t2"], "P1 english")


def test_layer_curves_draw_a_shared_model_once_in_layer_order() -> None:
    from polymnesia.experiments.two_phase.figures import layer_curves
    from polymnesia.results import Score

    def s(model: str, layer: int, v: float) -> Score:
        return Score(
            model=model,
            lang="en",
            metric="layer_covariance_drift",
            value=v,
            step=layer,
            extra={"reference": "P1 en"},
        )

    layer = [s("base", 1, 2.0), s("base", 0, 1.0), s("P2 a", 0, 0.5), s("base", 0, 1.0)]
    curves = layer_curves(layer)
    assert curves["base vs P1 en"] == ([0.0, 1.0], [1.0, 2.0])
    assert curves["P2 a vs P1 en"] == ([0.0], [0.5])

"""Several training seeds pooled in one two_phase report (issue 29, item 1): hand-checkable
means over seeds, intervals over seeds and items that widen with the seed spread, paired tests
over seeds x documents, and a one-seed run that is exactly what it was before."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from polymnesia.errors import DataError
from polymnesia.experiments.loading import load_config
from polymnesia.experiments.two_phase.abilities import (
    Ability,
    ability_interval,
    paired_difference,
    pooled_difference,
    pooled_interval,
    pooled_score,
)
from polymnesia.experiments.two_phase.claims import claims
from polymnesia.experiments.two_phase.evidence import Evidence
from polymnesia.experiments.two_phase.figures import layer_curves
from polymnesia.experiments.two_phase.roles import cft_stage, evaluated_models, p1_stage
from polymnesia.experiments.two_phase.tables import by_model, seed_cell
from polymnesia.items import ItemSet
from polymnesia.results import Score

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "configs" / "two_phase_smoke.yaml"


def _docs(task: str, values: list[float] | np.ndarray, **kw: object) -> ItemSet:
    vals = [float(v) for v in values]
    ids = [f"d{i}" for i in range(len(vals))]
    return ItemSet("m", "en", "docs", ids, {"acc": vals}, task=task, **kw)  # type: ignore[arg-type]


def _ab(**tasks: list[float] | np.ndarray) -> Ability:
    return Ability({t: _docs(t, v) for t, v in tasks.items()})


def test_the_pooled_score_is_the_mean_over_seeds() -> None:
    s0, s1 = _ab(t=[1.0, 1.0, 0.0, 0.0]), _ab(t=[1.0, 1.0, 1.0, 0.0])
    assert pooled_score([s0, s1]) == pytest.approx((0.5 + 0.75) / 2)
    iv = pooled_interval([s0, s1])
    assert iv.estimate == pytest.approx(0.625) and iv.n == 4
    assert iv.method.startswith("seeds and items: t over 2 training seeds")
    assert "bootstrap over 4 documents of 1 tasks" in iv.method


def test_one_seed_is_exactly_the_item_bootstrap_of_before() -> None:
    rng = np.random.default_rng(3)
    a, b = _ab(t=rng.random(40), u=rng.random(25)), _ab(t=rng.random(40), u=rng.random(25))
    assert pooled_interval([a]) == ability_interval(a)
    assert pooled_difference([a], [b]) == paired_difference(a, b)
    assert pooled_score([a]) == a.score()


def test_a_seed_spread_the_items_cannot_see_widens_the_interval() -> None:
    # within each seed both models share every document's difficulty, so the paired item
    # bootstrap has no spread; the effect is 0.1 with seed 0 and 0.3 with seed 1
    hard = np.random.default_rng(0).random(50)
    a = [_ab(t=hard + 0.1), _ab(t=hard + 0.3)]
    b = [_ab(t=hard), _ab(t=hard)]
    one = pooled_difference(a[:1], b[:1])
    assert (one.effect, one.high - one.low) == pytest.approx((0.1, 0.0))
    t = pooled_difference(a, b)
    # no item part: the paired t-test over the seeds' effects 0.1 and 0.3,
    # 0.2 ± t_{1, 0.975} x s / sqrt(2) with s / sqrt(2) = 0.1
    assert t.effect == pytest.approx(0.2)
    half = stats.t.ppf(0.975, 1) * 0.1  # 1.27
    assert (t.low, t.high) == pytest.approx((0.2 - half, 0.2 + half))
    assert t.p_value == pytest.approx(stats.ttest_rel([0.1, 0.3], [0.0, 0.0]).pvalue)  # 0.295
    assert t.n == 50
    assert t.method.startswith("paired seeds and items: t over 2 training seeds (1.0 df)")
    assert "bootstrap over 50 items" in t.method


def test_identical_models_differ_by_exactly_zero_in_every_seed() -> None:
    seeds = [_ab(t=[1.0, 0.0, 1.0]), _ab(t=[0.0, 0.0, 1.0])]
    t = pooled_difference(seeds, seeds)
    assert (t.effect, t.low, t.high, t.p_value) == (0.0, 0.0, 0.0, 1.0)


def test_seeds_on_different_documents_are_refused_in_one_line() -> None:
    with pytest.raises(DataError, match="different tasks or document counts") as e:
        pooled_interval([_ab(t=[1.0, 0.0]), _ab(t=[1.0, 0.0, 1.0])])
    assert "\n" not in str(e.value)
    with pytest.raises(DataError, match="cannot pair 2 training seeds with 1"):
        pooled_difference([_ab(t=[1.0]), _ab(t=[0.0])], [_ab(t=[1.0])])


def test_a_cell_over_seeds_is_the_student_t_interval() -> None:
    cell = seed_cell([0.2, 0.4], 8)
    half = stats.t.ppf(0.975, 1) * np.std([0.2, 0.4], ddof=1) / np.sqrt(2)
    assert cell.value == pytest.approx(0.3) and cell.n == 8
    assert (cell.low, cell.high) == pytest.approx((0.3 - half, 0.3 + half))


def _score(model: str, value: float, seed: int | None, metric: str = "des", **kw: object) -> Score:
    return Score(model, "en", metric, value, seed=seed, **kw)  # type: ignore[arg-type]


def test_similarity_and_drift_are_means_over_seeds() -> None:
    des = [_score("a -> b", 0.5, 0), _score("a -> b", 0.7, 1), _score("a -> c", 0.1, 0)]
    assert by_model(des, "des") == {"a -> b": [0.5, 0.7], "a -> c": [0.1]}
    layer = [
        _score("P2", v, seed, "layer_covariance_drift", step=step, extra={"reference": "P1"})
        for seed, step, v in [(0, 0, 1.0), (0, 1, 2.0), (1, 0, 3.0), (1, 1, 6.0)]
    ]
    assert layer_curves(layer) == {"P2 vs P1": ([0, 1], [2.0, 4.0])}
    one = [s for s in layer if s.seed == 0]
    assert layer_curves(one) == {"P2 vs P1": ([0, 1], [1.0, 2.0])}


class _Run:
    """The part of a run table Evidence reads: item sets, tagged with their seeds, and the run
    record's stages with the seed each serves and its name in that seed's pipeline."""

    def __init__(self, sets: list[ItemSet]) -> None:
        self.sets = sets
        stages = {s.stage: s.seed for s in sets if s.stage is not None and s.seed is not None}
        self.record = {
            "stages": {
                n: {"seeds": [k], "unseeded": n.removesuffix(f".seed{k}")}
                for n, k in stages.items()
            }
        }

    def items(self) -> list[ItemSet]:
        return self.sets


def _model_items(cfg: object, stage: str, seed: int, ea: float, ma: float) -> list[ItemSet]:
    """A model's documents of every harness task: ``ea`` / ``ma`` of 10 answered right."""
    h = cfg.evaluate.harness  # type: ignore[attr-defined]
    name = f"eval_{stage}" + (f".seed{seed}" if seed else "")
    out = []
    for tasks, share in ((h.english, ea), (h.multilingual, ma)):
        for t in tasks:
            right = round(10 * share)
            out.append(_docs(t, [1.0] * right + [0.0] * (10 - right), seed=seed, stage=name))
    return out


def test_evidence_pools_each_models_seeds_and_claims_cover_them() -> None:
    cfg = load_config(SMOKE, ["seeds=[0,1]"])
    pair = cfg.pairs[0]
    p1, p2 = p1_stage(pair.phase1), cft_stage(pair)
    sets = [
        *_model_items(cfg, p1, 0, ea=0.6, ma=0.2),
        *_model_items(cfg, p1, 1, ea=0.8, ma=0.2),
        *_model_items(cfg, p2, 0, ea=0.6, ma=0.4),
        *_model_items(cfg, p2, 1, ea=0.6, ma=0.6),
    ]
    ev = Evidence(cfg, _Run(sets))  # type: ignore[arg-type]
    assert ev.seeds == [0, 1] and ev.has(p1) and ev.has(p2)
    assert ev.score(p1, "EA") == pytest.approx(0.7) and ev.score(p2, "MA") == pytest.approx(0.5)
    cell = ev.cell(p2, "MA")
    assert cell.value == pytest.approx(0.5) and "2 training seeds" in cell.method
    t = ev.difference(p2, p1, "EA")
    assert t.effect == pytest.approx(-0.1) and "seeds and items" in t.method
    # a model scored with one seed only is not evidence of the pooled run
    partial = Evidence(cfg, _Run(sets[:18]))  # type: ignore[arg-type]  # p2: seed 0 only
    assert partial.has(p1) and not partial.has(p2)
    arms = {k: v for k, v in evaluated_models(cfg).items() if k.startswith("mit_")}
    found = claims(cfg, ev, arms)
    similar = [c for c in found if c.statement.startswith("Phase 2 on a similar set")]
    assert len(similar) == 1 and "seeds and items" in similar[0].test
    # with several seeds the intervals cover the seeds: no seed-noise band applies
    assert all(c.noise is None and not c.unmeasured for c in found)  # seeds cover themselves


def test_seeds_are_paired_by_document_id_not_by_position() -> None:
    """A harness stage may list one seed's documents in another order: the pooled test pairs
    them by id (crossed design); seeds on different documents get the nested design."""
    rng = np.random.default_rng(0)
    values = rng.integers(0, 2, 40).astype(float)

    def ab(ids: list[str], vals: np.ndarray) -> Ability:
        return Ability({"t": replace(_docs("t", vals), ids=ids)})

    ids = [f"d{i}" for i in range(40)]
    order = list(rng.permutation(40))
    # seed 1 lists the same documents shuffled; model b is model a with 5 documents flipped
    flip = np.zeros(40)
    flip[:5] = 1.0
    a = [ab(ids, values), ab([ids[i] for i in order], values[order])]
    b = [
        ab(ids, np.abs(values - flip)),
        ab([ids[i] for i in order], np.abs(values - flip)[order]),
    ]
    by_id = pooled_difference(a, b, n_resamples=300)
    assert "shared by the seeds" in by_id.method
    same_order = [a[0], a[0]], [b[0], b[0]]
    reference = pooled_difference(*same_order, n_resamples=300)
    assert (by_id.effect, by_id.low, by_id.high) == pytest.approx(
        (reference.effect, reference.low, reference.high)
    )
    other = [a[0], ab([f"e{i}" for i in range(40)], values)]
    assert "resampled per seed" in pooled_interval(other, n_resamples=300).method

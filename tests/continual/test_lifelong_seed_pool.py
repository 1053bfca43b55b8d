"""lifelong pools training seeds: every number the mean over seeds, replicates over seeds and items
(issue 29), on small hand-checkable matrices."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from polymnesia.errors import DataError
from polymnesia.experiments.lifelong.claims import learned_arms, method_claims, script_claims
from polymnesia.experiments.lifelong.evidence import (
    Evidence,
    Pool,
    SeedReplicates,
    SeedRun,
    arm_quantity,
    best_of,
    metric_replicates,
)
from polymnesia.experiments.lifelong.results import Arm, matrix_metrics
from polymnesia.experiments.seed_records import seed_view
from polymnesia.items import ItemSet
from polymnesia.metrics.seed_items import seed_item_interval
from polymnesia.reports.baselines import label_baselines
from polymnesia.reports.frame import RunTable
from polymnesia.results import Score, write_scores

ORDER = ["en", "fr", "ru"]
B = 200


def _R(diag: float, below: float) -> np.ndarray:
    """Diagonal ``diag``; each language falls to ``below`` once a later one is learned."""
    R = np.full((3, 3), below)
    np.fill_diagonal(R, diag)
    R[np.triu_indices(3, 1)] = 0.1  # not learned yet
    return R


def _arm(label: str, method: str, R: np.ndarray, noise: float, rng: np.random.Generator) -> Arm:
    reps = R[None] + rng.normal(0, noise, size=(B, 3, 3))
    return Arm(label, method, None, 1, 1, Rs={"o": R}, reps={"o": reps})


def _evidence() -> Evidence:
    base = label_baselines(list(range(4)) * 10, n_labels=4)  # chance / majority 0.25
    return Evidence(120, 0.95, {}, baselines=dict.fromkeys(ORDER, base))


def _seed(seed: int, vanilla: np.ndarray, gap: float) -> SeedRun:
    """One seed: VANILLA with ``vanilla``, MONO the same matrix ``gap`` higher everywhere."""
    rng = np.random.default_rng(seed)
    v = _arm("VANILLA", "vanilla", vanilla, 0.01, rng)
    mono = Arm("MONO", "mono", None, 1, 1, Rs={"o": vanilla + gap}, reps={"o": v.reps["o"] + gap})  # type: ignore[index]
    return SeedRun(seed, {"o": ORDER}, [v, mono], _evidence())


def test_one_seed_pool_gives_that_seeds_numbers_unchanged() -> None:
    run = _seed(0, _R(0.8, 0.5), 0.1)
    pool = Pool([run])
    v = run.arms[0]
    assert not pool.several and pool.arms is run.arms
    mine = pool.quantity(v, lambda rs, o: float(rs["o"][-1].mean()))
    alone = arm_quantity(v, lambda rs: float(rs["o"][-1].mean()), run.ev)
    assert mine.point == alone.point and np.array_equal(mine.values, alone.values)
    assert mine.what == "test items"
    m = pool.metrics()["VANILLA"]
    ref = metric_replicates(v, run.orders, {}, run.ev)
    assert all(np.array_equal(m[k].values, ref[k].values, equal_nan=True) for k in ref)
    assert pool.matrix("VANILLA", "o")[1] == ""


def test_several_seeds_pool_the_mean_with_seed_and_item_replicates() -> None:
    # seed 0 keeps 0.5 of a learned language, seed 1 keeps 0.3: CBT -0.3 and -0.5
    runs = [_seed(0, _R(0.8, 0.5), 0.1), _seed(1, _R(0.8, 0.3), 0.1)]
    pool = Pool(runs)
    m = pool.metrics()
    cbt = m["VANILLA"]["cbt"]
    assert cbt.point == pytest.approx(-0.4)  # mean of -0.3 and -0.5
    assert cbt.what == "2 training seeds and test items"
    per_seed = [metric_replicates(r.arms[0], r.orders, {}, r.ev)["cbt"] for r in runs]
    # the item replicates of the mean over seeds: replicate b of both seeds on one resample
    assert np.allclose(cbt.values, (per_seed[0].values + per_seed[1].values) / 2)
    assert np.allclose(cbt.points, [-0.3, -0.5])
    assert np.allclose(cbt.per_seed, [per_seed[0].values, per_seed[1].values])
    expected = seed_item_interval([-0.3, -0.5], cbt.per_seed, n=120)
    assert (cbt.interval().low, cbt.interval().high) == pytest.approx((expected.low, expected.high))
    # the interval covers the seeds: s = 0.1414, s / sqrt(2) = 0.1, t_{~1 df} ~ 12.7, so
    # far wider than either seed's item interval alone (and than the 0.2 between the seeds)
    width = cbt.interval().high - cbt.interval().low
    assert width > 2.0 > 0.15 > max(r.interval().high - r.interval().low for r in per_seed)
    # final: (0.5 + 0.5 + 0.8) / 3 and (0.3 + 0.3 + 0.8) / 3, mean over seeds
    assert m["VANILLA"]["final"].point == pytest.approx((1.8 / 3 + 1.4 / 3) / 2)
    assert cbt.interval().method.startswith("seeds and items: t over 2 training seeds")


def test_differences_between_arms_stay_paired_over_seeds_and_items() -> None:
    pool = Pool([_seed(0, _R(0.8, 0.5), 0.1), _seed(1, _R(0.8, 0.3), 0.1)])
    m = pool.metrics()
    d = m["MONO"]["final"] - m["VANILLA"]["final"]
    assert d.point == pytest.approx(0.1) and np.allclose(d.values, 0.1)
    t = d.test()
    assert t.low == pytest.approx(0.1) and t.p_value == 0.0
    assert t.method.startswith("paired seeds and items: t over 2 training seeds")
    # CBT -0.3 and -0.5: two seeds give t_{1 df} = 12.7 x 0.1, an interval across zero;
    # a third seed at -0.4 gives -0.4 ± 4.30 x 0.1 / sqrt(3) = [-0.65, -0.15]
    claims = {c.statement: c for c in method_claims(pool.arms, m)}
    assert claims["VANILLA forgets: CBT < 0"].verdict == "inconclusive"
    three = Pool(
        [_seed(0, _R(0.8, 0.5), 0.1), _seed(1, _R(0.8, 0.3), 0.1), _seed(2, _R(0.8, 0.4), 0.1)]
    ).metrics()
    claims = {c.statement: c for c in method_claims(pool.arms, three)}
    assert claims["VANILLA forgets: CBT < 0"].verdict == "holds"


def test_learned_check_and_script_claims_read_every_seed() -> None:
    # seed 0 learned (diagonal 0.8), seed 1 did not (0.1): the mean 0.45 < 2 x chance 0.25
    runs = [_seed(0, _R(0.8, 0.5), 0.1), _seed(1, _R(0.1, 0.1), 0.0)]
    pool = Pool(runs)
    ok = learned_arms(pool.arms, pool, "accuracy")
    assert ok == {"VANILLA": False, "MONO": True}  # MONO: 0.55 > 0.5
    assert learned_arms(pool.arms, Pool(runs[:1]), "accuracy")["VANILLA"] is True
    found = script_claims(pool.arms[0], pool.orders, 1, pool, ok)
    assert found and all(c.verdict == "not testable" for c in found)


def test_a_pooled_matrix_is_the_mean_only_where_seeds_share_the_order() -> None:
    a, b = _seed(0, _R(0.8, 0.5), 0.1), _seed(1, _R(0.8, 0.3), 0.1)
    R, note = Pool([a, b]).matrix("VANILLA", "o")
    assert note == "mean over 2 seeds" and R[2, 0] == pytest.approx(0.4)
    b.orders = {"o": ["ru", "fr", "en"]}  # a destructive order measured on seed 1's arms
    R, note = Pool([a, b]).matrix("VANILLA", "o")
    assert note == "seed 0 (the order differs between seeds)" and R[2, 0] == 0.5


def test_seeds_without_item_evidence_give_bare_means_and_other_arms_are_refused() -> None:
    a, b = _seed(0, _R(0.8, 0.5), 0.1), _seed(1, _R(0.8, 0.3), 0.1)
    b.ev = None
    m = Pool([a, b]).metrics()
    assert m["VANILLA"]["cbt"].point == pytest.approx(-0.4)
    assert not m["VANILLA"]["cbt"].interval().has_spread
    b.arms = b.arms[:1]
    with pytest.raises(DataError, match="seed 1 has arms \\['VANILLA'\\], seed 0 has"):
        Pool([a, b])


def test_matrix_metrics_of_the_hand_matrix() -> None:
    got = matrix_metrics({"o": _R(0.8, 0.5)}, {"o": ORDER}, {})
    assert got["cbt"] == pytest.approx(-0.3) and got["final"] == pytest.approx(0.6)


def test_seed_view_reads_a_later_seed_under_the_first_seeds_stage_names(tmp_path: Path) -> None:
    scores = [
        Score("VANILLA", "en", "accuracy", 0.5, seed=0, stage="vanilla_o_0"),
        Score("VANILLA", "en", "accuracy", 0.7, seed=1, stage="vanilla_o_0.seed1"),
    ]
    write_scores(tmp_path / "results" / "scores.jsonl", scores[:1])  # a run holds a record
    # the names each stage has in its seed's own pipeline, as the runner records them
    owners = {"vanilla_o_0": [0], "vanilla_o_0.seed1": [1], "x.seed1": [1]}
    stages = {n: {"seeds": k, "unseeded": n.removesuffix(".seed1")} for n, k in owners.items()}
    (tmp_path / "run.json").write_text(json.dumps({"stages": stages}))
    items = [ItemSet("VANILLA", "en", "values", [0], {"values": [1.0]}, seed=1, stage="x.seed1")]
    view = seed_view(RunTable(tmp_path).with_records(scores, items), 1, [0, 1])
    assert [(s.value, s.stage) for s in view.scores()] == [(0.7, "vanilla_o_0")]
    assert [s.stage for s in view.items()] == ["x"]
    assert [
        s.stage for s in seed_view(RunTable(tmp_path).with_records(scores, []), 0, [0, 1]).scores()
    ] == ["vanilla_o_0"]


def test_best_of_over_seeds_keeps_the_top_arms_seed_values() -> None:
    # MULTI's claim compares with the best other arm: pooled, that arm's per-seed values
    runs = [_seed(0, _R(0.8, 0.5), 0.1), _seed(1, _R(0.8, 0.3), 0.1)]
    m = Pool(runs).metrics()
    best = best_of([m["VANILLA"]["final"], m["MONO"]["final"]])
    assert isinstance(best, SeedReplicates)
    assert best.point == m["MONO"]["final"].point
    assert np.array_equal(best.points, m["MONO"]["final"].points)
    d = m["MONO"]["final"] - best
    assert d.point == pytest.approx(0.0) and np.allclose(d.points, 0.0)
    with pytest.raises(DataError, match="pooled over the same seeds"):
        _ = m["MONO"]["final"] - arm_quantity(runs[0].arms[0], lambda rs: 0.0, runs[0].ev)

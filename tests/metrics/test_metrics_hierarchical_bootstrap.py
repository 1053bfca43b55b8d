"""Seeds and items resampled together: hand-checkable cases of the two-stage bootstrap."""

from __future__ import annotations

import numpy as np
import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.uncertainty import (
    bootstrap_ci,
    hierarchical_bootstrap_ci,
    mean_statistic,
    paired_hierarchical_bootstrap,
    stratified_bootstrap_ci,
)


def _bern(p: float, n: int = 200, seed: int = 0):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    return mean_statistic((rng.random(n) < p).astype(float))


def test_one_seed_is_the_item_bootstrap_and_says_so() -> None:
    s = _bern(0.3)
    one = hierarchical_bootstrap_ci([s], n_resamples=500, seed=3)
    ref = stratified_bootstrap_ci([s], n_resamples=500, seed=3)
    assert (one.estimate, one.low, one.high) == (ref.estimate, ref.low, ref.high)
    assert one.method.startswith("one seed")


def test_seed_spread_alone_gives_the_seed_bootstrap_by_hand() -> None:
    # two seeds, every item of seed 0 scores 0 and of seed 1 scores 1: a replicate is the
    # mean of two seeds drawn with replacement, 0 (p 1/4), 0.5 (1/2) or 1 (1/4)
    zero, one = mean_statistic(np.zeros(50)), mean_statistic(np.ones(50))
    iv = hierarchical_bootstrap_ci([zero, one], n_resamples=4000, seed=0)
    assert iv.estimate == 0.5 and (iv.low, iv.high) == (0.0, 1.0)
    assert "2 training seeds and 50 items" in iv.method
    narrow = hierarchical_bootstrap_ci([zero, one], n_resamples=4000, level=0.4, seed=0)
    assert (narrow.low, narrow.high) == (0.5, 0.5)  # the middle 40% of {0: 1/4, .5: 1/2, 1: 1/4}


def test_training_seed_variance_widens_the_interval_beyond_the_items() -> None:
    seeds = [_bern(p, seed=i) for i, p in enumerate((0.35, 0.5, 0.65))]
    both = hierarchical_bootstrap_ci(seeds, seed=1)
    items_only = bootstrap_ci(seeds[1], seed=1)
    assert both.high - both.low > 1.5 * (items_only.high - items_only.low)
    assert both.low < 0.45 and both.high > 0.55


def test_strata_per_seed_average_languages_first() -> None:
    per_seed = [
        [mean_statistic(np.full(10, a)), mean_statistic(np.full(30, b))]
        for a, b in ((0.2, 0.4), (0.2, 0.4))
    ]
    iv = hierarchical_bootstrap_ci(per_seed, n_resamples=200)
    assert iv.estimate == pytest.approx(0.3) and iv.low == pytest.approx(0.3)
    assert iv.high == pytest.approx(0.3) and iv.n == 40


def test_paired_differences_share_seeds_and_items() -> None:
    a = [_bern(p, seed=i) for i, p in enumerate((0.4, 0.6, 0.5))]
    same = paired_hierarchical_bootstrap(a, a, n_resamples=300)
    assert (same.effect, same.low, same.high, same.p_value) == (0.0, 0.0, 0.0, 1.0)
    shifted = [mean_statistic(s.columns[:, 0] + 0.1) for s in a]
    t = paired_hierarchical_bootstrap(shifted, a, n_resamples=300)
    assert t.effect == pytest.approx(0.1) and t.low == pytest.approx(0.1)
    assert t.high == pytest.approx(0.1) and t.p_value == 0.0
    assert "paired two-stage bootstrap over 3 training seeds" in t.method


def test_mismatched_seeds_or_items_are_refused() -> None:
    with pytest.raises(PolymnesiaError, match="same items"):
        hierarchical_bootstrap_ci([_bern(0.5, n=10), _bern(0.5, n=12)])
    with pytest.raises(PolymnesiaError, match="paired seeds and items must match"):
        paired_hierarchical_bootstrap([_bern(0.5), _bern(0.5)], [_bern(0.5)])


def test_seeds_on_one_test_set_keep_the_item_spread() -> None:
    # three seeds with the very same item scores: no seed variance, so the interval of their
    # mean is the item bootstrap's; resampling items afresh for each drawn seed (the nested
    # design, for seeds with test sets of their own) would shrink it by about sqrt(3)
    s = _bern(0.3, n=300)
    one = bootstrap_ci(s, n_resamples=4000, seed=0)
    crossed = hierarchical_bootstrap_ci([s, s, s], n_resamples=4000, seed=0)
    nested = hierarchical_bootstrap_ci([s, s, s], n_resamples=4000, seed=0, shared_items=False)
    width = one.high - one.low
    assert crossed.high - crossed.low == pytest.approx(width, rel=0.1)
    assert nested.high - nested.low == pytest.approx(width / np.sqrt(3), rel=0.15)
    assert "items shared by the seeds" in crossed.method
    assert "items of each seed" in nested.method

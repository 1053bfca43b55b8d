"""Coverage of the interval over training seeds and test items, by seeded Monte Carlo.

The short version of benchmarks/seed_item_coverage.py (docs/metrics.md quotes the long one):
every cell of seed-to-item variance ratios 0, 1, 3 and 10, crossed, nested and partly
shared designs, 0/1 and continuous items, 3 and 5 seeds covers 93-97%, at most 1.2x as
wide as the exact interval where one exists. 2000 runs per cell (a Monte Carlo standard
error of 0.5 points) are a few vectorised numpy operations at the bootstrap's limit; a
separate test checks that the bootstrap itself gives that limit.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from polymnesia.metrics.hierarchical import hierarchical_bootstrap_ci
from polymnesia.metrics.seed_item_coverage import (
    Cell,
    draw,
    exact_half_widths,
    half_widths,
    simulate,
)
from polymnesia.metrics.seed_items import seed_item_moments
from polymnesia.metrics.uncertainty import mean_statistic

RATIOS = (0, 1, 3, 10)
RUNS = 2000
N = 200


def _cells() -> list[Cell]:
    grid = itertools.product(("crossed", "nested", "partial"), ("continuous", "binary"), (3, 5))
    return [
        simulate(design, outcome, k, N, ratio, RUNS, seed=100 * i + j)
        for i, (design, outcome, k) in enumerate(grid)
        for j, ratio in enumerate(RATIOS)
    ]


def test_every_cell_covers_93_to_97_percent_and_is_no_wider_than_allowed() -> None:
    cells = _cells()
    assert len(cells) == 48
    bad = [
        f"{c.design}/{c.outcome} k={c.k} ratio={c.ratio}: {100 * c.coverage:.1f}%"
        for c in cells
        if not 0.93 <= c.coverage <= 0.97
    ]
    assert not bad, bad
    exact = [c for c in cells if c.width_ratio is not None]
    # crossed at ratio 0 (item-mean t) and every nested cell (seed-mean t) have one
    assert len(exact) == 4 + 16
    wide = [f"{c.design}/{c.outcome} k={c.k} ratio={c.ratio}: {c.width_ratio:.2f}x" for c in exact]
    assert all(c.width_ratio is not None and c.width_ratio <= 1.2 for c in exact), wide
    # the exact intervals themselves cover about 95% (the simulation draws what it says)
    assert all(c.exact_coverage is not None and 0.93 <= c.exact_coverage <= 0.97 for c in exact)


def _old_half_widths(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The estimator before issue 44: the item variance of the mean plus s^2 / k, Welch df."""
    runs, k, n = d.shape
    x = d.mean(axis=2)
    c = d - x[..., None]
    cov = np.einsum("rsi,rti->rst", c, c) / n**2
    var_seeds, var_items, _ = seed_item_moments(x, cov)
    var = var_items + var_seeds
    with np.errstate(divide="ignore"):
        df = np.where(var_seeds > 0, var**2 / (var_seeds**2 / (k - 1)), np.inf)
    return x.mean(axis=1), stats.t.ppf(0.975, df) * np.sqrt(var)


def test_the_old_double_count_fails_the_same_check() -> None:
    # crossed 0/1 items with no seed variance: the interaction was in both components
    d, truth = draw("crossed", "binary", 3, N, 0, RUNS, np.random.default_rng(7))
    est, old = _old_half_widths(d)
    exact = exact_half_widths(d, "crossed", 0)
    assert exact is not None
    assert np.mean(np.abs(est - truth) <= old) > 0.97  # outside the band (about 98%)
    assert np.mean(old) / np.mean(exact) > 1.15  # 1.20x
    _, new = half_widths(d, N)
    assert np.mean(new) / np.mean(exact) < np.mean(old) / np.mean(exact)


@pytest.mark.parametrize(("design", "shared"), [("crossed", 60), ("nested", 0), ("partial", 54)])
def test_the_bootstrap_reaches_the_moments_the_simulation_uses(design: str, shared: int) -> None:
    # one draw of 3 seeds x 60 items: the interval from 4000 item resamples matches the
    # half width computed from the plug-in covariances (the bootstrap's limit)
    d, _ = draw(design, "continuous", 3, 60, 1, 1, np.random.default_rng(11))
    _, half = half_widths(d, shared)
    seeds = [mean_statistic(row) for row in d[0]]
    flag: bool | list[int] = {"crossed": True, "nested": False, "partial": [shared]}[design]
    iv = hierarchical_bootstrap_ci(seeds, n_resamples=4000, seed=2, shared_items=flag)
    assert iv.half_width == pytest.approx(float(half[0]), rel=0.05)

"""A seeded Monte Carlo of the interval over training seeds and test items (its coverage).

Each run draws the item scores of ``k`` training seeds from a two-level model and builds
the interval of their grand mean with the estimator of
:func:`~polymnesia.metrics.seed_items.seed_item_interval`, its item moments taken at the
item bootstrap's limit (the plug-in covariances over items, divided by ``n``), so that
thousands of runs are a few vectorised numpy operations. A cell reports how often the
interval covers the true mean and its mean width against the exact interval's where one
exists. The test suite runs a short version (tests/metrics/test_seed_item_coverage.py);
``benchmarks/seed_item_coverage.py`` prints the long table quoted in docs/metrics.md.

The model (``d[s, i]`` the score of seed ``s`` on item ``i``):

* ``continuous``: ``d = a_s + b_i + c_si``, ``b ~ N(0, 1)``, ``c ~ N(0, 1)``;
* ``binary``: ``d ~ Bernoulli(expit(MU + a_s + b_i))`` with logit item effects
  ``b ~ N(0, ITEM_LOGIT_SD^2)`` (accuracy about 0.56; the Bernoulli draw is the
  interaction);

with ``a_s ~ N(0, sigma_a^2)``, ``sigma_a^2 = ratio x`` the item variance of one seed's
mean (on the logit scale for ``binary``: ``ratio x`` that variance divided by the slope of
the mean accuracy, squared). Designs: ``crossed`` (every seed scored on the same ``n``
items), ``nested`` (each seed its own ``n`` items) and ``partial`` (``shared`` items common
to all seeds, the other ``n - shared`` each seed's own). Exact intervals: crossed with
``ratio = 0``, the t-interval over the ``n`` item means (``n - 1`` df); nested, the
t-interval over the ``k`` seed means (``k - 1`` df), exact under normality.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special, stats

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.seed_items import seed_item_df, seed_item_moments, seed_item_variance

DESIGNS = ("crossed", "nested", "partial")
OUTCOMES = ("continuous", "binary")
MU = 0.25  # binary: the logit of the median item
ITEM_LOGIT_SD = 2.0  # binary: the spread of item difficulty on the logit scale


@dataclass(frozen=True)
class Cell:
    """One cell of the simulation: coverage of the true mean over ``runs`` runs, the mean
    width of the interval and, where an exact interval exists, the ratio of mean widths."""

    design: str
    outcome: str
    k: int
    n: int
    ratio: float
    runs: int
    coverage: float
    width: float
    exact_coverage: float | None
    width_ratio: float | None


def _gauss() -> tuple[np.ndarray, np.ndarray]:
    x, w = np.polynomial.hermite_e.hermegauss(96)
    return x, w / w.sum()


def _binary_scale(n: int, ratio: float) -> tuple[float, float]:
    """``(sigma_a on the logit scale, the true mean accuracy)`` for ``ratio``."""
    x, w = _gauss()
    p = special.expit(MU + ITEM_LOGIT_SD * x)
    mean = float(w @ p)
    slope = float(w @ (p * (1 - p)))  # d mean / d (logit shift)
    sigma_a = float(np.sqrt(ratio * mean * (1 - mean) / n) / slope)
    truth = float(w @ special.expit(MU + np.hypot(sigma_a, ITEM_LOGIT_SD) * x))
    return sigma_a, truth


def draw(
    design: str, outcome: str, k: int, n: int, ratio: float, runs: int, rng: np.random.Generator
) -> tuple[np.ndarray, float]:
    """``[runs, k, n]`` item scores and the true grand mean. ``partial``: the first
    ``n - n // 10`` items shared by every seed, the last tenth each seed's own."""
    if design not in DESIGNS or outcome not in OUTCOMES:
        raise PolymnesiaError(
            f"unknown cell {design}/{outcome}; accepted designs {DESIGNS}, outcomes {OUTCOMES}"
        )
    shared = {"crossed": n, "nested": 0, "partial": n - n // 10}[design]
    item_sd = 1.0 if outcome == "continuous" else ITEM_LOGIT_SD
    common = rng.normal(0.0, item_sd, (runs, 1, shared))
    own = rng.normal(0.0, item_sd, (runs, k, n - shared))
    b = np.concatenate([np.broadcast_to(common, (runs, k, shared)), own], axis=2)
    if outcome == "continuous":
        sigma_a = float(np.sqrt(ratio * 2.0 / n))  # one seed's item variance: (1 + 1) / n
        a = rng.normal(0.0, sigma_a, (runs, k, 1))
        return a + b + rng.normal(0.0, 1.0, (runs, k, n)), 0.0
    sigma_a, truth = _binary_scale(n, ratio)
    a = rng.normal(0.0, sigma_a, (runs, k, 1))
    return (rng.random((runs, k, n)) < special.expit(MU + a + b)).astype(float), truth


def half_widths(d: np.ndarray, shared: int, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """``(estimates, half widths)`` of the interval over seeds and items of each run of
    ``d`` (``[runs, k, n]``, the first ``shared`` items common to every seed), with the item
    moments at the bootstrap's limit."""
    runs, k, n = d.shape
    x = d.mean(axis=2)
    centred = d - x[..., None]
    diag = np.einsum("rsi,rsi->rs", centred, centred) / n**2
    cov = np.zeros((runs, k, k))
    if shared:
        s = d[..., :shared] - d[..., :shared].mean(axis=2, keepdims=True)
        cov = np.einsum("rsi,rti->rst", s, s) / n**2
    idx = np.arange(k)
    cov[:, idx, idx] = diag
    var_seeds, var_items, var_within = seed_item_moments(x, cov)
    var = seed_item_variance(k, var_seeds, var_items, var_within)
    df = seed_item_df(k, var_seeds, var_items, var_within, n - 1)
    return x.mean(axis=1), stats.t.ppf((1 + level) / 2, df) * np.sqrt(var)


def exact_half_widths(
    d: np.ndarray, design: str, ratio: float, level: float = 0.95
) -> np.ndarray | None:
    """Half widths of the exact interval (None where the cell has none)."""
    runs, k, n = d.shape
    q = (1 + level) / 2
    if design == "nested":
        return stats.t.ppf(q, k - 1) * d.mean(axis=2).std(axis=1, ddof=1) / np.sqrt(k)
    if design == "crossed" and ratio == 0:
        return stats.t.ppf(q, n - 1) * d.mean(axis=1).std(axis=1, ddof=1) / np.sqrt(n)
    return None


def simulate(
    design: str, outcome: str, k: int, n: int, ratio: float, runs: int, seed: int = 0
) -> Cell:
    """One cell: ``runs`` runs drawn with ``numpy.random.default_rng(seed)``."""
    rng = np.random.default_rng(seed)
    d, truth = draw(design, outcome, k, n, ratio, runs, rng)
    shared = {"crossed": n, "nested": 0, "partial": n - n // 10}[design]
    est, half = half_widths(d, shared)
    covered = float(np.mean(np.abs(est - truth) <= half))
    exact = exact_half_widths(d, design, ratio)
    exact_cov = None if exact is None else float(np.mean(np.abs(est - truth) <= exact))
    ratio_w = None if exact is None else float(np.mean(half) / np.mean(exact))
    return Cell(
        design, outcome, k, n, ratio, runs, covered, float(2 * np.mean(half)), exact_cov, ratio_w
    )

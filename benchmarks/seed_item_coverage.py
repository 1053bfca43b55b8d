"""Coverage and width of the interval over training seeds and test items (a script, not a test).

Prints a markdown table over the cells of the simulation in
:mod:`polymnesia.metrics.seed_item_coverage`: one row per design (crossed, nested, partly
shared: a tenth of each seed's items its own), items (0/1, continuous), 3 and 5 seeds and
50 and 200 items, the four seed-to-item variance ratios 0, 1, 3 and 10 side by side. Columns:
the coverage of the interval (:func:`~polymnesia.metrics.seed_items.seed_item_interval`),
its mean width over the exact interval's where one exists (crossed at ratio 0, every
nested cell), the exact interval's coverage, and the coverage and width ratio of the
estimator before issue 44 (item variance of the mean plus ``s^2 / k`` with Welch df; a
seed whose items differed made the whole design nested). docs/metrics.md quotes its output.

Run: ``python benchmarks/seed_item_coverage.py [--runs 10000]`` (about a minute on one core).
"""

from __future__ import annotations

import argparse
import itertools
import subprocess
import time

import numpy as np
from scipy import stats

from polymnesia.metrics.seed_item_coverage import (
    DESIGNS,
    OUTCOMES,
    draw,
    exact_half_widths,
    half_widths,
)
from polymnesia.metrics.seed_items import seed_item_moments


def old_half_widths(d: np.ndarray, design: str) -> tuple[np.ndarray, np.ndarray]:
    """The estimator before issue 44: ``var_items + s^2 / k``, Welch-Satterthwaite df, the
    item part crossed only where every seed had the same items."""
    runs, k, n = d.shape
    x = d.mean(axis=2)
    c = d - x[..., None]
    cov = np.einsum("rsi,rti->rst", c, c) / n**2
    if design != "crossed":  # one differing id made the stratum nested
        cov = cov * np.eye(k)
    var_seeds, var_items, _ = seed_item_moments(x, cov)
    var = var_items + var_seeds
    with np.errstate(divide="ignore"):
        df = np.where(var_seeds > 0, var**2 / (var_seeds**2 / (k - 1)), np.inf)
    return x.mean(axis=1), stats.t.ppf(0.975, df) * np.sqrt(var)


RATIOS = (0, 1, 3, 10)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10000, help="runs per cell")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    print(f"{args.runs} runs per cell, seed {args.seed}, commit {commit or 'unknown'}\n")
    ratios = " / ".join(map(str, RATIOS))
    print(
        f"| design | items | k | n | coverage % at ratio {ratios} | width / exact "
        f"| exact's coverage % | before: coverage % | before: width / exact |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    start = time.perf_counter()
    i = 0
    for design, outcome, k, n in itertools.product(DESIGNS, OUTCOMES, (3, 5), (50, 200)):
        new, old, exact_cov, new_w, old_w = [], [], [], [], []
        for ratio in RATIOS:
            rng = np.random.default_rng([args.seed, i])
            i += 1
            d, truth = draw(design, outcome, k, n, ratio, args.runs, rng)
            shared = {"crossed": n, "nested": 0, "partial": n - n // 10}[design]
            est, half = half_widths(d, shared)
            _, before = old_half_widths(d, design)
            err = np.abs(est - truth)
            new.append(_pct(float(np.mean(err <= half))))
            old.append(_pct(float(np.mean(err <= before))))
            exact = exact_half_widths(d, design, ratio)
            if exact is not None:
                exact_cov.append(_pct(float(np.mean(err <= exact))))
                new_w.append(f"{np.mean(half) / np.mean(exact):.2f}")
                old_w.append(f"{np.mean(before) / np.mean(exact):.2f}")
        print(
            f"| {design} | {outcome} | {k} | {n} | {' / '.join(new)} | {' / '.join(new_w)} "
            f"| {' / '.join(exact_cov)} | {' / '.join(old)} | {' / '.join(old_w)} |"
        )
    print(f"\n{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()

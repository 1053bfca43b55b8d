"""Figures 2, 3, 5, 6 and 7 of Khelli et al. 2025 for a lifelong run (with several training seeds,
the
mean over seeds, as each caption says)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from polymnesia.continual.analysis import hop_average, ranking
from polymnesia.experiments.lifelong.evidence import Pool
from polymnesia.experiments.lifelong.results import Arm, average_curve, per_language
from polymnesia.metrics.continual import Shift, average_learned, performance_shift
from polymnesia.reports import curves, heatmaps, plots
from polymnesia.reports.render import Report


def figures(
    rep: Report,
    arms: list[Arm],
    orders: dict[str, list[str]],
    hops: int,
    run_dir: Path,
    shift: Shift = "literal",
    pool: Pool | None = None,
) -> None:
    """Figures 2, 3 (P_avg with the ``shift`` reading), 5, 6 and 7 of Khelli et al. 2025; with a
    ``pool`` of several seeds each drawn quantity is the mean over them."""
    fig_dir = run_dir / "figures"
    several = pool is not None and pool.several
    over = f" (mean over {len(pool.runs)} seeds)" if pool is not None and several else ""
    T = len(next(iter(orders.values())))
    series = {a.label: (list(range(1, T + 1)), list(100 * _curve(a, pool))) for a in arms}
    bands = {a.label: b for a in arms if (b := _curve_band(a, pool, T)) is not None}
    curves.line_plot(
        series,
        fig_dir / "fig2_average_over_steps.png",
        xlabel="step",
        ylabel="average score over learned languages (%)",
        title="Figure 2: average score after each step (mean over orders)",
        integer_x=True,
        errors=bands,
    )
    rep.image(
        "figures/fig2_average_over_steps.png",
        f"Figure 2: average over learned languages after each step{over}"
        + ("; error bars: the 95% interval over test items" if bands else "")
        + (" and seeds" if bands and several else ""),
    )
    drawn = [a for a in arms if a.method in ("vanilla", "shared_lora")]
    per_lang = {a.label: _per_language(a, orders, hops, shift, pool) for a in drawn}
    hop_maps: dict[tuple[str, str], tuple[np.ndarray, list[str]]] = {}
    for arm in drawn:
        for kind in ("mbt", "mft"):
            pl = per_lang[arm.label]
            langs = [lang for lang, _ in ranking(hop_average(pl[kind]))]
            mat = np.array([[pl[kind][lang][h] for lang in langs] for h in range(hops + 1)])
            hop_maps[(arm.label, kind)] = (mat, langs)
    r_maps: dict[tuple[str, str], tuple[Any, str]] = {}
    for arm in drawn:
        for name, R in arm.Rs.items():
            what = ""
            if pool is not None and several:
                R, note = pool.matrix(arm.label, name)
                what = f" ({note})"
            r_maps[(arm.label, name)] = (R, what)
    # figures read side by side share one colour scale: MBT of every arm, MFT, and every R
    limits = {
        kind: heatmaps.shared_limits(m for (_, k), (m, _) in hop_maps.items() if k == kind)
        for kind in ("mbt", "mft")
    }
    r_limits = heatmaps.shared_limits(R for R, _ in r_maps.values())
    changes = {
        a.label: {k: -v for k, v in per_lang[a.label]["shift"].items() if not math.isnan(v)}
        for a in drawn
    }
    spans = {a.label: _change_intervals(a, shift, pool) for a in drawn}
    change_range = plots.shared_range(
        [v for c in changes.values() for v in c.values()]
        + [v for s in spans.values() for iv in s.values() for v in iv]
    )
    for arm in drawn:
        stem = f"{arm.method}_r{arm.rank}" if arm.rank else arm.method
        change = changes[arm.label]
        if change:
            plots.bar_plot(
                change,
                fig_dir / f"fig3_change_{stem}.png",
                intervals=spans[arm.label],
                signed_colors=True,
                sort=True,
                fmt=".3f",
                limits=change_range,
                ylabel="performance change (-P_avg)",
                title=f"Figure 3: change caused by each language, {arm.label}",
            )
            rep.image(
                f"figures/fig3_change_{stem}.png",
                f"Figure 3 ({arm.label}): performance change after training each language "
                f"(-P_avg, eq. 9 read '{shift}'){over}"
                + (f"; error bars: the 95% interval over {_over(pool)}" if spans[arm.label] else "")
                + " (one scale for every arm)",
            )
        for kind, fig in (("mbt", 5), ("mft", 6)):
            mat, langs = hop_maps[(arm.label, kind)]
            heatmaps.heatmap(
                mat,
                [str(h) for h in range(hops + 1)],
                langs,
                fig_dir / f"fig{fig}_{kind}_{stem}.png",
                center=0.0,
                limits=limits[kind],
                xlabel="language (sorted by average)",
                ylabel="hop",
                title=f"Figure {fig}: {kind.upper()}, {arm.label}",
            )
            rep.image(
                f"figures/fig{fig}_{kind}_{stem}.png",
                f"Figure {fig}: {kind.upper()} by language and hop, {arm.label}{over} (one "
                "colour scale for every arm)",
            )
        for name in arm.Rs:
            R, what = r_maps[(arm.label, name)]
            order = orders[name]
            heatmaps.heatmap(
                R,
                [f"{i}:{lang}" for i, lang in enumerate(order)],
                order,
                fig_dir / f"fig7_R_{stem}_{name}.png",
                limits=r_limits,
                xlabel="evaluated language",
                ylabel="after step",
                title=f"Figure 7: R, {arm.label}, order {name}",
            )
            rep.image(
                f"figures/fig7_R_{stem}_{name}.png",
                f"Figure 7: R for {arm.label}, order {name}{what} (one colour scale for every "
                "arm and order)",
            )


def _curve_band(arm: Arm, pool: Pool | None, steps: int) -> tuple[list[float], list[float]] | None:
    """Figure 2's 95% interval after each step (in %), from the item replicates (and seeds)
    of ``pool``; None without item evidence."""
    if pool is None:
        return None
    lo, hi = [], []
    for t in range(steps):

        def at(rs: Any, _orders: Any, t: int = t) -> float:
            return float(np.mean([average_learned(R)[t] for R in rs.values()]))

        iv = pool.quantity(arm, at).interval()
        if not (math.isfinite(iv.low) and math.isfinite(iv.high)):
            return None
        lo.append(100 * iv.low)
        hi.append(100 * iv.high)
    return lo, hi


def _change_intervals(arm: Arm, shift: Shift, pool: Pool | None) -> dict[str, tuple[float, float]]:
    """Figure 3's 95% interval of each language's change (-P_avg), from the item replicates
    (and seeds) of ``pool``: languages without a finite one are left out (empty without
    item evidence)."""
    if pool is None:
        return {}

    def shifts(rs: Any, orders: Any) -> dict[str, float]:
        names = list(rs)
        return performance_shift([orders[n] for n in names], [rs[n] for n in names], shift=shift)

    out: dict[str, tuple[float, float]] = {}
    for lang, reps in pool.lang_quantities(arm, shifts).items():
        iv = reps.interval()
        if math.isfinite(iv.low) and math.isfinite(iv.high):
            out[lang] = (-iv.high, -iv.low)
    return out


def _over(pool: Pool | None) -> str:
    return "test items and seeds" if pool is not None and pool.several else "test items"


def _curve(arm: Arm, pool: Pool | None) -> np.ndarray:
    if pool is None or not pool.several:
        return average_curve(arm)
    return np.mean([average_curve(r.arm(arm.label)) for r in pool.runs], axis=0)


def _nanmean(arrays: list[Any]) -> Any:
    """Element-wise mean leaving NaN out (NaN where every value is NaN)."""
    arr = np.asarray(arrays, dtype=float)
    count = np.sum(~np.isnan(arr), axis=0)
    total = np.nansum(arr, axis=0)
    return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _per_language(
    arm: Arm, orders: dict[str, list[str]], hops: int, shift: Shift, pool: Pool | None
) -> dict[str, Any]:
    """:func:`per_language` of ``arm``, mean over the pool's seeds (each with its orders)."""
    if pool is None or not pool.several:
        return per_language(arm, orders, hops, shift)
    per_seed = [per_language(r.arm(arm.label), r.orders, hops, shift) for r in pool.runs]
    return {
        key: {
            lang: (
                float(_nanmean([p[key][lang] for p in per_seed]))
                if key == "shift"
                else _nanmean([p[key][lang] for p in per_seed])
            )
            for lang in per_seed[0][key]
        }
        for key in per_seed[0]
    }

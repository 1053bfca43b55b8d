"""Figures 2, 3, 5, 6 and 7 of paper 004 for a lifelong run."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from polymnesia.continual.analysis import hop_average, ranking
from polymnesia.experiments.lifelong.results import Arm, average_curve, per_language
from polymnesia.metrics.continual import Shift
from polymnesia.reports import plots
from polymnesia.reports.render import Report


def figures(
    rep: Report,
    arms: list[Arm],
    orders: dict[str, list[str]],
    hops: int,
    run_dir: Path,
    shift: Shift = "literal",
) -> None:
    """Figures 2, 3 (P_avg with the ``shift`` reading), 5, 6 and 7 of paper 004."""
    fig_dir = run_dir / "figures"
    T = len(next(iter(orders.values())))
    series = {a.label: (list(range(1, T + 1)), list(100 * average_curve(a))) for a in arms}
    plots.line_plot(
        series,
        fig_dir / "fig2_average_over_steps.png",
        xlabel="step",
        ylabel="average score over learned languages (%)",
        title="Figure 2: average score after each step (mean over orders)",
    )
    rep.image(
        "figures/fig2_average_over_steps.png",
        "Figure 2: average over learned languages after each step",
    )
    for arm in arms:
        if arm.method not in ("vanilla", "shared_lora"):
            continue
        stem = f"{arm.method}_r{arm.rank}" if arm.rank else arm.method
        pl = per_language(arm, orders, hops, shift)
        change = {k: -v for k, v in pl["shift"].items() if not math.isnan(v)}
        if change:
            plots.bar_plot(
                change,
                fig_dir / f"fig3_change_{stem}.png",
                signed_colors=True,
                sort=True,
                fmt=".3f",
                ylabel="performance change (-P_avg)",
                title=f"Figure 3: change caused by each language, {arm.label}",
            )
            rep.image(
                f"figures/fig3_change_{stem}.png",
                f"Figure 3 ({arm.label}): performance change after training each language (-P_avg, "
                f"eq. 9 read '{shift}')",
            )
        for kind, fig in (("mbt", 5), ("mft", 6)):
            avg = hop_average(pl[kind])
            langs = [lang for lang, _ in ranking(avg)]
            mat = np.array([[pl[kind][lang][h] for lang in langs] for h in range(hops + 1)])
            plots.heatmap(
                mat,
                [str(h) for h in range(hops + 1)],
                langs,
                fig_dir / f"fig{fig}_{kind}_{stem}.png",
                center=0.0,
                xlabel="language (sorted by average)",
                ylabel="hop",
                title=f"Figure {fig}: {kind.upper()}, {arm.label}",
            )
            rep.image(
                f"figures/fig{fig}_{kind}_{stem}.png",
                f"Figure {fig}: {kind.upper()} by language and hop, {arm.label}",
            )
        for name, R in arm.Rs.items():
            order = orders[name]
            plots.heatmap(
                R,
                [f"{i}:{lang}" for i, lang in enumerate(order)],
                order,
                fig_dir / f"fig7_R_{stem}_{name}.png",
                xlabel="evaluated language",
                ylabel="after step",
                title=f"Figure 7: R, {arm.label}, order {name}",
            )
            rep.image(
                f"figures/fig7_R_{stem}_{name}.png", f"Figure 7: R for {arm.label}, order {name}"
            )

"""Figures of the ``two_phase`` report: Figure 1 (t-SNE of mean hidden activations per layer),
Figure 2 (per-layer covariance change) and the EA/MA trade-off of every arm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from polymnesia.experiments.shared import PRETRAIN
from polymnesia.experiments.two_phase.config import TwoPhaseConfig
from polymnesia.reports.plots import line_plot, scatter_plot
from polymnesia.reports.render import Report
from polymnesia.results import Score


def layer_curves(layer: list[Score]) -> dict[str, tuple[list[float], list[float]]]:
    """Figure 2's lines: per model (against its reference) the drift of each layer; a model
    that two pairs share (the base) is drawn once."""
    points: dict[str, dict[int, float]] = {}
    for s in layer:
        key = f"{s.model} vs {s.extra.get('reference', 'P1')}"
        points.setdefault(key, {})[int(s.step or 0)] = s.value
    return {
        k: ([float(x) for x in sorted(v)], [v[x] for x in sorted(v)]) for k, v in points.items()
    }


def figures(
    cfg: TwoPhaseConfig,
    rep: Report,
    run_dir: Path,
    ev: Any,
    scores: list[Score],
    labels: dict[str, str],
) -> None:
    figs = run_dir / "figures"
    layer = [s for s in scores if s.metric == "layer_covariance_drift"]
    for pair in cfg.pairs:
        drift_dir = run_dir / "stages" / f"drift_{pair.key}"
        tsne = drift_dir / "tsne.json"
        if tsne.is_file():
            pts = json.loads(tsne.read_text(encoding="utf-8"))
            path = figs / f"fig1_tsne_{pair.key}.png"
            series = {
                k: (np.asarray(v)[:, 0].tolist(), np.asarray(v)[:, 1].tolist())
                for k, v in pts.items()
            }
            scatter_plot(
                series,
                path,
                title=f"{pair.phase1} -> {pair.phase2}",
                xlabel="t-SNE 1",
                ylabel="t-SNE 2",
                zero_lines=False,
            )
            rep.image(
                str(path.relative_to(run_dir)),
                f"Figure 1: t-SNE of the mean hidden activations per layer ({pair.phase1} -> {pair.phase2})",
            )
    if layer:
        curves = layer_curves(layer)
        path = figs / "fig2_layer_drift.png"
        line_plot(
            curves,
            path,
            xlabel="layer",
            ylabel="||Σ_i(P1) - Σ_i(model)||_F",
            title="Per-layer change of English representations",
        )
        rep.image(
            str(path.relative_to(run_dir)),
            "Figure 2: per-layer covariance change against the Phase 1 model",
        )
    base = PRETRAIN if ev.has(PRETRAIN) else None
    if base is not None:
        pts2: dict[str, tuple[list[float], list[float]]] = {}  # arm -> (MA change, EA change)
        ea0, ma0 = (a.score() for a in ev.abilities(base))
        for stage, label in labels.items():
            if stage != base and ev.has(stage):
                ea, ma = (a.score() for a in ev.abilities(stage))
                pts2[label] = ([ma - ma0], [ea - ea0])
        if pts2:
            path = figs / "ea_ma_tradeoff.png"
            scatter_plot(
                pts2,
                path,
                title="EA and MA change against the base model",
                xlabel="MA - MA(base)",
                ylabel="EA - EA(base)",
            )
            rep.image(
                str(path.relative_to(run_dir)), "EA/MA trade-off: every arm against the base model"
            )

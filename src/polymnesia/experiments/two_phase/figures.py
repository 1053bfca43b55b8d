"""Figures of the ``two_phase`` report: Figure 1 (t-SNE of mean hidden activations per layer),
Figure 2 (per-layer covariance change) and the EA/MA trade-off of every arm.

Figures 1 and 2 need at least :data:`MIN_LAYERS` layers: with two, Figure 2's per-layer
values are equal by construction (the covariance of a 2-row matrix has one direction) and
Figure 1 has two points per model; below that the report says why they are absent.

With several training seeds Figure 2 and the trade-off plot show means over seeds, and Figure 1
is drawn once per seed (each seed's t-SNE is its own embedding; coordinates of two runs are not
comparable); the captions say so."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from polymnesia.experiments.seed_records import StageSeeds
from polymnesia.experiments.seeds import seed_list
from polymnesia.experiments.shared import PRETRAIN
from polymnesia.experiments.two_phase.config import TwoPhaseConfig
from polymnesia.reports.curves import line_plot, scatter_plot
from polymnesia.reports.plots import series_colours
from polymnesia.reports.render import Report
from polymnesia.reports.style import LINESTYLES
from polymnesia.results import Score, StageRecord

#: layers (rows of mean activations) below which Figures 1 and 2 carry no information
MIN_LAYERS = 3


def _curve_key(s: Score) -> str:
    return f"{s.model} vs {s.extra.get('reference', 'P1')}"


def layer_curves(layer: list[Score]) -> dict[str, tuple[list[int], list[float]]]:
    """Figure 2's lines: per model (against its reference) the drift of each layer (integer
    layer indices); a model that two pairs share (the base) is drawn once. Records tagged with
    training seeds give each layer the mean over seeds."""
    points: dict[str, dict[int, dict[int | None, float]]] = {}
    for s in layer:
        points.setdefault(_curve_key(s), {}).setdefault(int(s.step or 0), {})[s.seed] = s.value
    return {
        k: (sorted(v), [_mean(list(v[x].values())) for x in sorted(v)]) for k, v in points.items()
    }


def _mean(values: Sequence[float]) -> float:
    return values[0] if len(values) == 1 else float(sum(values) / len(values))


def _reference_styles(curves: Mapping[str, Any]) -> dict[str, str]:
    """Per curve ("MODEL vs REFERENCE"): solid for a model's first reference, then dashed,
    dotted, dash-dotted."""
    seen: dict[str, int] = {}
    out = {}
    for key in curves:
        model = key.split(" vs ")[0]
        out[key] = LINESTYLES[seen.get(model, 0) % len(LINESTYLES)]
        seen[model] = seen.get(model, 0) + 1
    return out


def too_few_layers(n: int) -> str:
    """Why Figures 1 and 2 are not drawn for a model with ``n`` layer rows."""
    return (
        f"Figures 1 and 2 are not drawn: the drift stage measured {n} layer(s), and they need at "
        f"least {MIN_LAYERS} (with 2 layers the per-layer covariance changes are equal by "
        "construction and the t-SNE has 2 points per model). Use a model with more layers "
        "(model.num_hidden_layers) or drift.include_embeddings."
    )


def figures(
    cfg: TwoPhaseConfig,
    rep: Report,
    run_dir: Path,
    ev: Any,
    scores: list[Score],
    labels: dict[str, str],
    records: Mapping[str, StageRecord],
    owners: Mapping[str, StageSeeds] | None = None,
) -> None:
    """Figures 1 and 2 and the EA/MA trade-off; Figure 1's points are the drift stages'
    ``tsne.json``, kept in the run's stage ``records``; ``owners`` (several seeds:
    :func:`~polymnesia.experiments.seed_records.run_stage_seeds`) says which drift stage is
    which seed's."""
    figs = run_dir / "figures"
    layer = [s for s in scores if s.metric == "layer_covariance_drift"]
    n_layers = len({int(s.step or 0) for s in layer})
    if layer and n_layers < MIN_LAYERS:
        rep.paragraph(too_few_layers(n_layers))
        layer = []
    seeds = seed_list(cfg)
    several = len(seeds) > 1
    tsne: list[tuple[Any, int, dict[str, Any]]] = []  # (pair, seed, model -> layer points)
    for pair, seed in [(p, s) for p in cfg.pairs for s in seeds] if layer else []:
        name = f"drift_{pair.key}"
        own = [n for n, o in (owners or {}).items() if o.unseeded == name and seed in o.seeds]
        drift = records.get(own[0] if own else name, records.get(name))
        pts = drift.files.get("tsne.json") if drift is not None else None
        if isinstance(pts, dict):
            tsne.append((pair, seed, pts))
    # one colour per model in Figures 1 and 2 and the trade-off plot
    colour = series_colours(
        [*(m for _, _, pts in tsne for m in pts), *(s.model for s in layer), *labels.values()]
    )
    for pair, seed, pts in tsne:
        tag = f"_seed{seed}" if several else ""
        path = figs / f"fig1_tsne_{pair.key}{tag}.png"
        series = {
            k: (np.asarray(v)[:, 0].tolist(), np.asarray(v)[:, 1].tolist()) for k, v in pts.items()
        }
        scatter_plot(
            series,
            path,
            title=f"{pair.phase1} -> {pair.phase2}" + (f", seed {seed}" if several else ""),
            xlabel="t-SNE 1",
            ylabel="t-SNE 2",
            zero_lines=False,
            colours=colour,
            point_labels={k: [f"L{j}" for j in range(len(xs))] for k, (xs, _) in series.items()},
            connect=True,
        )
        per = (
            f"; training seed {seed}: one figure per seed, as the t-SNE coordinates of two "
            "seeds are not comparable"
            if several
            else ""
        )
        rep.image(
            str(path.relative_to(run_dir)),
            f"Figure 1: t-SNE of the mean hidden activations per layer ({pair.phase1} -> "
            f"{pair.phase2}{per}); each point is marked with its layer (L0 the first) and a "
            "model's layers are joined in order",
        )
    curves = layer_curves(layer)
    ticks = sorted({x for xs, _ in curves.values() for x in xs})
    # every line on the same integer layers, labelled as integers (not 0.5 steps)
    curves = {k: v for k, v in curves.items() if v[0] == ticks}
    if curves:
        path = figs / "fig2_layer_drift.png"
        line_plot(
            {k: ([float(x) for x in xs], ys) for k, (xs, ys) in curves.items()},
            path,
            xticklabels=[str(x) for x in ticks],
            xlabel="layer",
            ylabel="||Σ_i(P1) - Σ_i(model)||_F",
            title="Per-layer change of English representations",
            # a model keeps its colour; its curves against two references (P2 after a similar
            # and after a dissimilar Phase 1, the comparison the figure exists for) differ by
            # line style
            colours={_curve_key(s): colour[s.model] for s in layer},
            linestyles=_reference_styles(curves),
        )
        mean = f", mean over {len(seeds)} training seeds" if several else ""
        rep.image(
            str(path.relative_to(run_dir)),
            f"Figure 2: per-layer covariance change against the Phase 1 model{mean}",
        )
    base = PRETRAIN if ev.has(PRETRAIN) else None
    if base is not None:
        pts2: dict[str, tuple[list[float], list[float]]] = {}  # arm -> (MA change, EA change)
        bounds: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {}
        for stage, label in labels.items():
            if stage != base and ev.has(stage):
                ma, ea = ev.difference(stage, base, "MA"), ev.difference(stage, base, "EA")
                pts2[label] = ([ma.effect], [ea.effect])
                bounds[label] = ((ma.low, ma.high), (ea.low, ea.high))
        if pts2:
            path = figs / "ea_ma_tradeoff.png"
            scatter_plot(
                pts2,
                path,
                title="EA and MA change against the base model",
                xlabel="MA - MA(base)",
                ylabel="EA - EA(base)",
                colours=colour,
                point_labels={k: [k] for k in pts2},
                intervals=bounds,
            )
            mean = f" (means over {len(seeds)} training seeds)" if several else ""
            rep.image(
                str(path.relative_to(run_dir)),
                f"EA/MA trade-off: every arm against the base model{mean}, each point named, "
                "with the paired 95% intervals of both changes",
            )

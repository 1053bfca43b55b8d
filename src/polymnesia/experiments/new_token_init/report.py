"""The ``new_token_init`` report: a table per step count, bits per byte against relearning
steps with a panel per base, and the claims (``claims.py``)."""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from polymnesia.experiments.base import banner_of
from polymnesia.experiments.new_token_init.claims import REFERENCE, Cell, Evidence, claims
from polymnesia.experiments.new_token_init.config import NewTokenInitConfig
from polymnesia.experiments.reporting import missing_arms_aside, training_curves
from polymnesia.experiments.seeds import variance_note, with_seed_band
from polymnesia.items import ItemSet, run_items
from polymnesia.reports.claims import correct
from polymnesia.reports.claims_table import claims_table
from polymnesia.reports.plots import outside_legend, save_figure
from polymnesia.reports.render import Report
from polymnesia.reports.style import series_style
from polymnesia.reports.table_core import Estimate, Table, write_table
from polymnesia.reports.verdicts import format_p

FIGURE = "plots/bpb_vs_steps.png"


def _relearn_items(run_dir: Path) -> list[ItemSet]:
    """The run's item sets of its ``relearn_new_tokens`` stages (``results/items.jsonl``)."""
    return [s for s in run_items(run_dir) if s.stage and s.stage.startswith("relearn_")]


def _groups(cfg: NewTokenInitConfig) -> dict[str, list[str]]:
    return {g: langs for g, langs in cfg.groups.as_dict().items() if langs}


def step_table(ev: Evidence, cfg: NewTokenInitConfig, step: int) -> Table:
    """Rows base x init: bpb per language and group with intervals, and the adapting group's
    paired difference against mean."""
    groups = _groups(cfg)
    langs = cfg.groups.all()
    rows = []
    for base in ev.bases():
        for init in ev.inits():
            cell = Cell(base, init, step)
            if not ev.has(cell, langs):
                continue
            row: list[object] = [base, init]
            row += [Estimate.of(ev.interval(cell, [lang])) for lang in langs]
            row += [Estimate.of(ev.interval(cell, g)) for g in groups.values()]
            ref = Cell(base, REFERENCE, step)
            if init == REFERENCE or not ev.has(ref, cfg.groups.adapting):
                row += ["–", "–"]
            else:
                t = ev.versus(cell, ref, cfg.groups.adapting)
                row += [
                    Estimate(t.effect, t.low, t.high, t.n, method=t.method),
                    format_p(t.p_value),
                ]
            rows.append(row)
    seeds = len(ev.seeds)
    what = "texts" if seeds == 1 else f"{seeds} training seeds and texts"
    return Table(
        name=f"bpb_step{step}",
        title=f"Bits per byte after {step} relearning steps",
        columns=[
            "base",
            "init",
            *langs,
            *(f"{g} group" for g in groups),
            "Δ adapting vs mean",
            "p",
        ],
        rows=rows,
        caption=f"Lower is better. 95% bootstrap intervals over {what}; a group is the mean over "
        "its languages. Δ: the adapting group's paired difference against mean on the same texts "
        "(paired bootstrap), p its two-sided p-value.",
    )


def figure(ev: Evidence, cfg: NewTokenInitConfig, path: Path) -> Path:
    """A panel per base: the adapting group's bpb against relearning steps, a line per init
    (top), and each init's paired difference against mean with its 95% interval (bottom); an
    init keeps its colour and marker in every panel (the figure style), the legend sits
    outside the panels, and steps are whole numbers."""
    bases = ev.bases()
    fig = Figure(figsize=(4.6 * len(bases) + 1.6, 7.0))
    axes = fig.subplots(2, len(bases), sharex=True, sharey="row", squeeze=False)
    adapting = cfg.groups.adapting
    for col, base in enumerate(bases):
        top, bottom = axes[0][col], axes[1][col]
        for i, init in enumerate(ev.inits()):
            st = series_style(i)
            pts = [s for s in ev.steps() if ev.has(Cell(base, init, s), adapting)]
            ys = [ev.interval(Cell(base, init, s), adapting).estimate for s in pts]
            top.plot(pts, ys, marker=st.marker, ms=3, ls=st.linestyle, label=init, color=st.colour)
            refs = [s for s in pts if ev.has(Cell(base, REFERENCE, s), adapting)]
            if init == REFERENCE or not refs:
                continue
            tests = [
                ev.versus(Cell(base, init, s), Cell(base, REFERENCE, s), adapting) for s in refs
            ]
            bottom.plot(
                refs,
                [t.effect for t in tests],
                marker=st.marker,
                ms=3,
                ls=st.linestyle,
                color=st.colour,
            )
            bottom.fill_between(
                refs,
                [t.low for t in tests],
                [t.high for t in tests],
                color=st.colour,
                alpha=0.15,
            )
        top.set_title(f"{base} base")
        bottom.axhline(0.0, color="black", lw=0.8)
        bottom.set_xlabel("relearning steps")
        for ax in (top, bottom):
            ax.grid(alpha=0.3)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    axes[0][0].set_ylabel("bits per byte (adapting group)")
    axes[1][0].set_ylabel("Δ bpb vs mean (95% paired interval)")
    outside_legend(axes[0][-1])
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    return save_figure(fig, path)


def _bases(cfg: NewTokenInitConfig) -> tuple[str | None, str | None]:
    """The first base with active forgetting and the first without (claims 2-3)."""
    af = next((b.name for b in cfg.bases if b.forgetting is not None), None)
    standard = next((b.name for b in cfg.bases if b.forgetting is None), None)
    return af, standard


def cells_table(ev: Evidence, cfg: NewTokenInitConfig) -> Table:
    """Every (base, init, step) cell's adapting-group bpb and its paired difference against
    mean, one row each (``results/relearning.csv``: the measured-run record reads it)."""
    adapting = cfg.groups.adapting
    rows: list[list[object]] = []
    for c in sorted(ev.cells, key=lambda c: (c.base, c.init, c.step)):
        if not ev.has(c, adapting):
            continue
        ref = Cell(c.base, REFERENCE, c.step)
        diff: object = "–"
        if c.init != REFERENCE and ev.has(ref, adapting):
            t = ev.versus(c, ref, adapting)
            diff = Estimate(t.effect, t.low, t.high, t.n, method=t.method)
        rows.append([f"{c.base}/{c.init}/{c.step}", Estimate.of(ev.interval(c, adapting)), diff])
    return Table(
        name="relearning",
        title="Adapting-group bits per byte of every base/init/step",
        columns=["base/init/step", "bpb", "delta_vs_mean"],
        rows=rows,
        caption="95% intervals as in the step tables; delta_vs_mean is paired on the same texts.",
    )


def write_report(cfg: NewTokenInitConfig, run_dir: Path) -> Path:
    ev = Evidence(
        _relearn_items(run_dir), n_resamples=cfg.bootstrap.n_resamples, seed=cfg.bootstrap.seed
    )
    r = cfg.relearn
    rep = Report(
        f"{cfg.name}: new-token initialisations and relearning", banner=banner_of(cfg, run_dir)
    )
    rep.paragraph(
        f"Base models ({cfg.model.describe()}, {cfg.pretrain.steps} pretraining steps on "
        f"{', '.join(cfg.groups.pretraining)}): "
        + ", ".join(
            f"{b.name} ("
            + (
                f"active forgetting, reset every {b.forgetting.reset_every}"
                if b.forgetting
                else "standard pretraining"
            )
            + ")"
            for b in cfg.bases
        )
        + f". The vocabulary is expanded for {', '.join(cfg.groups.adapting)} "
        f"({r.vocabulary.new_vocab_size}-token adapting BPE merged into the base); the new rows "
        f"are initialised by each of {', '.join(r.inits)} (head: {r.head}), then only the new rows "
        f"and the head are trained for {r.train.steps} steps. Bits per byte on the "
        f"{cfg.evaluate.split} split at steps {', '.join(map(str, r.steps()))}; training seeds: "
        f"{', '.join(map(str, ev.seeds)) or 'none yet'}."
    )
    rep.paragraph(variance_note(cfg))
    af, standard = _bases(cfg)
    found = correct(with_seed_band(claims(ev, cfg.groups.adapting, af, standard), cfg))
    found = missing_arms_aside(found, run_dir)
    results = run_dir / "results"
    if found:
        rep.claims(found, "Claims at this scale")
        write_table(results, claims_table(found))
    rep.heading("Bits per byte by step count", 2)
    for step in ev.steps():
        table = step_table(ev, cfg, step)
        rep.table(table)
        write_table(results, table)
    if ev.cells:
        rep.heading("Figure", 2)
        figure(ev, cfg, run_dir / FIGURE)
        rep.image(
            FIGURE,
            "adapting-group bits per byte against relearning steps, a panel per base; below, each "
            "init minus mean with its 95% paired interval",
        )
        write_table(results, cells_table(ev, cfg))
    training_curves(rep, run_dir)
    md, _ = rep.write(run_dir)
    return md

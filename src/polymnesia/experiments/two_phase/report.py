"""The ``two_phase`` report: Tables 1-5 and Figures 1-2 of the two-phase CFT paper, the EA/MA
trade-off, the
correlation of EA change with DES and MPD, and the paper's claims judged with this run's
intervals.

With several training seeds (``seeds: [..]``), every EA, MA and Combined number is the mean
over seeds, its interval and every claim's paired test over seeds and documents (item and
seed variance, Student t; :mod:`polymnesia.experiments.two_phase.abilities`); lm-eval's
per-task cells and DES/MPD are means over seeds with the Student-t interval over seeds;
Figure 2 and the EA/MA trade-off plot means over seeds and Figure 1 is drawn per seed (t-SNE
coordinates of two runs are not comparable). With one seed the report is what it was before
seeds existed."""

from __future__ import annotations

from pathlib import Path

from scipy.stats import spearmanr

from polymnesia.experiments.base import banner_of
from polymnesia.experiments.papers import cite
from polymnesia.experiments.reporting import missing_arms_aside, training_curves
from polymnesia.experiments.seed_records import run_stage_seeds, seeded_run
from polymnesia.experiments.seeds import seed_list, variance_note
from polymnesia.experiments.two_phase.claims import (
    MIN_CORRELATION_PAIRS,
    claims,
    similarity_series,
)
from polymnesia.experiments.two_phase.config import PairConfig, TwoPhaseConfig
from polymnesia.experiments.two_phase.evidence import Evidence
from polymnesia.experiments.two_phase.figures import figures
from polymnesia.experiments.two_phase.roles import evaluated_models, mitigation_arms
from polymnesia.experiments.two_phase.tables import (
    ability_table,
    mitigation_table,
    similarity_tables,
)
from polymnesia.reports.claims_table import claims_table
from polymnesia.reports.frame import load_run
from polymnesia.reports.render import Report
from polymnesia.reports.table_core import write_table
from polymnesia.reports.verdicts import p_text
from polymnesia.results import Score


def correlation_lines(cfg: TwoPhaseConfig, ev: Evidence, scores: list[Score]) -> list[str]:
    """Spearman of the EA change after Phase 2 with DES and with MPD, over the pairs."""
    change, des, mpd = similarity_series(cfg, ev, scores)
    out = []
    means = " (means over training seeds)" if len(seed_list(cfg)) > 1 else ""
    for name, other, sign in (("DES", des, "+"), ("MPD", mpd, "-")):
        keys = [k for k in change if k in other]
        if len(keys) < 3:
            out.append(
                f"EA change vs {name}: {len(keys)} pair(s); a rank correlation needs at least 3 "
                f"to be computed and {MIN_CORRELATION_PAIRS} to reach p < 0.05 (the paper "
                f"expects sign {sign})."
            )
            continue
        rho, p = spearmanr([change[k] for k in keys], [other[k] for k in keys])
        out.append(
            f"EA change vs {name}: Spearman rho = {rho:+.3f}, {p_text(p)}, n = {len(keys)} pairs"
            f"{means} (paper: sign {sign})."
        )
    return out


def write_report(cfg: TwoPhaseConfig, run_dir: Path) -> Path:
    # every record of the run, read once, each tagged with its training seed
    run = seeded_run(load_run(run_dir), seed_list(cfg))
    scores = run.scores()
    results = run_dir / "results"
    labels = evaluated_models(cfg)
    arms = mitigation_arms(cfg)
    ev = Evidence(cfg, run)
    rep = Report(
        f"{cfg.name}: two-phase continual instruction fine-tuning ({cite('002')})",
        banner=banner_of(cfg, run_dir),
    )
    pairs = "; ".join(f"{p.phase1} -> {p.phase2}" for p in cfg.pairs)
    rep.paragraph(
        f"Base: {cfg.base.describe()}. Phase-wise pairs: {pairs}. Every model is scored through "
        f"lm-evaluation-harness: EA on {', '.join(cfg.evaluate.harness.english)}; MA on "
        f"{', '.join(cfg.evaluate.harness.multilingual)} ({cfg.evaluate.harness.limit or 'all'} "
        "documents per "
        "task). Instruction sets and their data cards are in stages/set_*/ while the cache holds "
        "them. " + variance_note(cfg)
    )
    found = missing_arms_aside(claims(cfg, ev, arms, scores), run_dir)
    if found:
        rep.claims(found)
        write_table(results, claims_table(found))
    rep.heading("Tables", 2)
    tables = [
        ability_table(cfg, ev, run, "EA", labels),
        ability_table(cfg, ev, run, "MA", labels),
    ]
    tables += similarity_tables(cfg, scores)
    mt = mitigation_table(cfg, ev, arms)
    tables += [mt] if mt is not None else []
    for t in tables:
        if t.rows:
            write_table(results, t)
            rep.heading(t.title, 3).table(t)
    lines = correlation_lines(cfg, ev, scores)
    if lines:
        rep.heading("EA change against dataset similarity", 3).bullets(lines)
    records = run.stages()
    seeds = seed_list(cfg)
    owners = run_stage_seeds(run.record, seeds) if len(seeds) > 1 else {}
    # each seed samples sets of one design: the first seed's cards describe them
    cards = [
        str(records[name].files.get("DATA_CARD.md", "")).splitlines()[0]
        for name in sorted(records)
        if name.startswith("set_")
        and (name not in owners or seeds[0] in owners[name].seeds)
        and records[name].files.get("DATA_CARD.md")
    ]
    if cards:
        rep.heading("Instruction sets", 3).bullets([c.lstrip("# ") for c in cards if c])
    rep.heading("Figures", 2)
    figures(cfg, rep, run_dir, ev, scores, labels, records, owners)
    training_curves(rep, run_dir)
    md, _ = rep.write(run_dir)
    return md


__all__ = ["PairConfig", "write_report"]

"""The ``language_modeling`` report: Table 1 of Aggarwal et al. 2024 by language group, figures,
curves."""

from __future__ import annotations

from pathlib import Path

from polymnesia.experiments.base import banner_of
from polymnesia.experiments.language_modeling.config import LanguageModelingConfig
from polymnesia.experiments.papers import cite
from polymnesia.experiments.reporting import lm_bar_plot, lm_tables, training_curves
from polymnesia.experiments.seed_records import seeded_run
from polymnesia.experiments.seeds import seed_list, variance_note
from polymnesia.reports.frame import load_run
from polymnesia.reports.render import Report


def write_report(cfg: LanguageModelingConfig, run_dir: Path) -> Path:
    seeds = seed_list(cfg)
    run = seeded_run(load_run(run_dir), seeds)  # every record of the run, read once
    scores = run.scores()
    groups = cfg.groups.as_dict()
    rep = Report(
        f"{cfg.name}: language modelling by language group", banner=banner_of(cfg, run_dir)
    )
    rep.paragraph(
        f"A decoder ({cfg.model.describe()}) trained for {cfg.train.steps} steps on "
        f"{', '.join(cfg.groups.pretraining)} (data source '{cfg.data.source}'), evaluated on the "
        f"{cfg.evaluate.split} split of {len(cfg.groups.all())} languages. Bits per byte does not "
        "depend on "
        "the tokenizer; token perplexity does. Groups follow "
        + cite("000")
        + " (Table 6). "
        + (
            "Intervals: 95% percentile bootstrap over the test texts of each language; a group "
            "mean's interval resamples the texts within each of its languages. "
            if len(seeds) == 1
            else ""
        )
        + variance_note(cfg, claims=False)
    )
    rep.heading("Results", 2)
    lm_tables(
        rep,
        run_dir,
        scores,
        groups,
        cfg.evaluate.headline,
        items=run.items(task="lm"),
    )
    rep.heading("Figures", 2)
    lm_bar_plot(rep, run_dir, scores, groups, cfg.evaluate.headline)
    training_curves(rep, run_dir)
    md, _ = rep.write(run_dir)
    return md

"""The ``two_phase`` report's tables: Table 1 (EA) and Table 2 (MA) per task and phase,
Tables 3-4 (dataset similarity and model parameter difference) and Table 5 (mitigating
strategies), with one seed or as means over training seeds."""

from __future__ import annotations

import math
from collections.abc import Sequence

from polymnesia.experiments.seeds import seed_list
from polymnesia.experiments.two_phase.config import TwoPhaseConfig
from polymnesia.experiments.two_phase.evidence import Evidence
from polymnesia.experiments.two_phase.roles import cft_stage, mix_stage, p1_stage
from polymnesia.metrics.seed_tests import seed_interval
from polymnesia.reports.frame import RunTable
from polymnesia.reports.table_core import Estimate, Table
from polymnesia.results import Score


def seed_cell(values: Sequence[float], n: int | None = None) -> Estimate:
    """The mean over training seeds with the Student-t interval over seeds."""
    iv = seed_interval(values)
    return Estimate(iv.estimate, iv.low, iv.high, n, method=iv.method)


def _task_value(run: RunTable, label: str, task: str, seeds: Sequence[int]) -> Estimate:
    """lm-eval's score of one task: with ±1.96 stderr (one seed), or the mean over training
    seeds with the Student-t interval over seeds."""
    rows = run.scores(model=label, task=task)
    for metric in ("prompt_level_strict_acc", "acc", "chrf", "exact_match", "f1", "acc_norm"):
        hit = [s for s in rows if s.metric == metric]
        if hit:
            scale = 100.0 if metric == "chrf" else 1.0
            if len(seeds) > 1:
                by_seed = {s.seed: s for s in reversed(hit)}  # each seed's first record
                if all(seed in by_seed for seed in seeds):
                    return seed_cell([by_seed[k].value / scale for k in seeds], by_seed[seeds[0]].n)
                return Estimate(math.nan)
            s = hit[0]
            half = 1.96 * s.stderr / scale if s.stderr is not None else math.nan
            v = s.value / scale
            return Estimate(v, v - half, v + half, s.n)
    return Estimate(math.nan)


def ability_table(
    cfg: TwoPhaseConfig, ev: Evidence, run: RunTable, which: str, labels: dict[str, str]
) -> Table:
    """Table 1 (EA) or Table 2 (MA): per task after Phase 1 and Phase 2, and the average."""
    h = cfg.evaluate.harness
    tasks = h.english if which == "EA" else h.multilingual
    cols = ["Phase 1", "Phase 2"]
    for t in tasks:
        cols += [f"{t} P1", f"{t} P2"]
    cols += ["Average P1", "Average P2"]
    rows: list[list[object]] = []
    for pair in cfg.pairs:
        p1, p2 = p1_stage(pair.phase1), cft_stage(pair)
        if not (ev.has(p1) and ev.has(p2)):
            continue
        row: list[object] = [pair.phase1, pair.phase2]
        for t in tasks:
            row += [
                _task_value(run, labels[p1], t, ev.seeds),
                _task_value(run, labels[p2], t, ev.seeds),
            ]
        row += [ev.cell(p1, which), ev.cell(p2, which)]
        rows.append(row)
    for pair in cfg.pairs:
        mix = mix_stage(pair)
        if ev.has(mix):
            row = [f"mixture: {pair.phase1} + {pair.phase2}", "(one phase)"]
            for t in tasks:
                row += [_task_value(run, labels[mix], t, ev.seeds), math.nan]
            rows.append([*row, ev.cell(mix, which), math.nan])
    number, what = (
        ("1", "English ability (EA)") if which == "EA" else ("2", "Multilingual ability (MA)")
    )
    caption = (
        "Per-task cells are lm-eval's scores with ±1.96 stderr (chrF on a 0-1 scale); the averages "
        "are means over the tasks of per-document values with stratified bootstrap intervals "
        f"(tasks: {', '.join(tasks)}). A mixture row is one model trained on both sets for as many "
        "steps as the two phases together."
    )
    k = len(ev.seeds)
    if k > 1:
        caption = (
            f"Every cell is the mean over {k} training seeds ({', '.join(map(str, ev.seeds))}). "
            "Per-task cells are lm-eval's scores (chrF on a 0-1 scale) with the Student-t "
            "interval over seeds; the averages are means over the tasks of per-document values "
            "with intervals over seeds and documents (the variance of a bootstrap of the "
            "documents within each task, shared by the seeds, plus the variance over seeds, "
            f"with a Student t quantile; tasks: {', '.join(tasks)}). A mixture row is one "
            "model trained on both sets for as many steps as the two phases together."
        )
    return Table(f"table{number}_{which.lower()}", f"Table {number}: {what}", cols, rows, caption)


def by_model(scores: Sequence[Score], metric: str) -> dict[str, list[float]]:
    """``metric``'s values per model label, one per training seed (in the run's seed order)."""
    out: dict[str, dict[int | None, float]] = {}
    for s in scores:
        if s.metric == metric:
            out.setdefault(s.model, {})[s.seed] = s.value
    return {m: list(v.values()) for m, v in out.items()}


def similarity_tables(cfg: TwoPhaseConfig, scores: list[Score]) -> list[Table]:
    des = [s for s in scores if s.metric == "des"]
    mpd = [s for s in scores if s.metric == "mpd"]
    seeds = seed_list(cfg)
    if len(seeds) > 1:
        return _pooled_similarity_tables(cfg, des, mpd, seeds)
    out = []
    if des:
        rows = [[s.model, s.value] for s in des]
        cap = f"Embedder: {cfg.similarity.embedder}; {des[0].extra.get('n', '?')} records per set."
        out.append(_des_table(rows, cap))
    if mpd:
        top = max(s.value for s in mpd) or 1.0
        rows = [[s.model, s.value, s.value / top] for s in mpd]
        cap = (
            "Both models fine-tuned from the same base, one on each set; normalised by the largest "
            "(as the paper)."
        )
        out.append(_mpd_table(rows, cap))
    return out


def _des_table(rows: list[list[object]], caption: str) -> Table:
    return Table(
        "table3_des",
        "Table 3: dataset similarity (DES, higher = more similar)",
        ["Phase 1 -> Phase 2", "DES"],
        rows,
        caption,
    )


def _mpd_table(rows: list[list[object]], caption: str) -> Table:
    return Table(
        "table4_mpd",
        "Table 4: model parameter difference (MPD, lower = more similar)",
        ["models", "MPD", "normalised"],
        rows,
        caption,
    )


def _pooled_similarity_tables(
    cfg: TwoPhaseConfig, des: list[Score], mpd: list[Score], seeds: list[int]
) -> list[Table]:
    """Tables 3 and 4 with several seeds: each seed builds its own instruction sets and models,
    so a cell is the mean over seeds with the Student-t interval over seeds."""
    k, out = len(seeds), []
    what = f"Mean over {k} training seeds ({', '.join(map(str, seeds))}; each seed samples its "
    if des:
        rows: list[list[object]] = [
            [m, seed_cell(v, len(v))] for m, v in by_model(des, "des").items()
        ]
        cap = (
            f"Embedder: {cfg.similarity.embedder}; {des[0].extra.get('n', '?')} records per set. "
            + what
            + "own instruction sets) with the Student-t interval over seeds."
        )
        out.append(_des_table(rows, cap))
    if mpd:
        cells = {m: seed_cell(v, len(v)) for m, v in by_model(mpd, "mpd").items()}
        top = max(c.value for c in cells.values()) or 1.0
        rows = [[m, c, c.value / top] for m, c in cells.items()]
        cap = (
            "Both models fine-tuned from the same base, one on each set; normalised by the largest "
            "mean (as the paper). "
            + what
            + "own sets and trains its own models) with the Student-t interval over seeds."
        )
        out.append(_mpd_table(rows, cap))
    return out


def mitigation_table(cfg: TwoPhaseConfig, ev: Evidence, arms: dict[str, str]) -> Table | None:
    m = cfg.mitigation
    if m is None:
        return None
    pair = cfg.pairs[m.pair]
    rows = []
    for stage, name in [(cft_stage(pair), "— (plain CFT)"), *arms.items()]:
        if ev.has(stage):
            rows.append(
                [name, ev.cell(stage, "EA"), ev.cell(stage, "MA"), ev.cell(stage, "combined")]
            )
    if not rows:
        return None
    cap = (
        f"Phase 2 of {pair.phase1} -> {pair.phase2} with each mitigation; Combined = (EA + MA) / 2."
    )
    if len(ev.seeds) > 1:
        cap += (
            f" Means over {len(ev.seeds)} training seeds with intervals over seeds and "
            "documents (document bootstrap plus the variance over seeds, Student t)."
        )
    return Table(
        "table5_mitigation",
        "Table 5: mitigating strategies",
        ["strategy", "EA", "MA", "Combined"],
        rows,
        cap,
    )

"""The lifelong report: claims, baselines, Tables 1-2 of Khelli et al. 2025 with intervals, the
language
analysis, cost and Figures 2, 3, 5, 6, 7.

Every headline number (final scores, vitality and script groups, CBT, CFT,
the forgetting variants) carries the percentile interval of the bootstrap
over test items that resamples every R entry consistently
(:mod:`polymnesia.experiments.lifelong.evidence`); a run without per-item
evidence prints bare numbers and says so. A run of several training seeds
(``seeds: [..]``) is read seed by seed and pooled
(:class:`~polymnesia.experiments.lifelong.evidence.Pool`): every number is the
mean over seeds, its interval over seeds and items (item bootstrap plus seed variance,
Student t).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from polymnesia.continual.analysis import (
    RESOURCE_COLUMNS,
    GroupBy,
    group_means,
    hop_average,
    ranking,
)
from polymnesia.continual.resample import Replicates
from polymnesia.experiments.base import banner_of
from polymnesia.experiments.lifelong.claims import (
    baseline_claims,
    baselines,
    headroom_of,
    hop_means,
    learned_arms,
    method_claims,
    script_claims,
    with_headroom,
)
from polymnesia.experiments.lifelong.config import LifelongConfig
from polymnesia.experiments.lifelong.evidence import (
    Evidence,
    Pool,
    SeedRun,
    as_pool,
    attach_evidence,
)
from polymnesia.experiments.lifelong.figures import figures
from polymnesia.experiments.lifelong.orders import order_lines
from polymnesia.experiments.lifelong.results import (
    METRICS,
    Arm,
    collect_arms,
    final_scores,
    multi_hop,
    per_language,
    read_orders,
    save_matrices,
    untrained_scores,
)
from polymnesia.experiments.papers import cite
from polymnesia.experiments.reporting import compute_table, missing_arms_aside, run_health
from polymnesia.experiments.seed_records import seed_view, seeded_run
from polymnesia.experiments.seeds import seed_list, variance_note, with_seed_band
from polymnesia.metrics.continual import Kind
from polymnesia.reports.claims import correct
from polymnesia.reports.claims_table import claims_table
from polymnesia.reports.frame import RunTable, load_run
from polymnesia.reports.render import Report
from polymnesia.reports.table_core import Estimate
from polymnesia.reports.tables import Table, matrix_table, write_table

BLOCKS = {"shared_lora": "SHARED LoRA", "nonshared_lora": "NON-SHARED LoRA"}
Metrics = Mapping[str, Mapping[str, Replicates]]


def cell(r: Replicates, scale: float = 1.0) -> Estimate | float:
    """A table cell: the value with its interval (scaled, e.g. to %), or the bare value."""
    iv = r.interval()
    if not iv.has_spread:
        return iv.estimate * scale
    return Estimate(iv.estimate * scale, iv.low * scale, iv.high * scale, iv.n, method=iv.method)


def _group(arm: Arm, pool: Pool, by: GroupBy, group: str) -> Replicates:
    def fn(rs: Mapping[str, np.ndarray], orders: Mapping[str, list[str]]) -> float:
        return group_means(final_scores(rs, orders), by).get(group, math.nan)

    return pool.quantity(arm, fn)


def _millions(params: int) -> str:
    """Parameters in millions as Table 1 prints them (two decimals, more for tiny adapters)."""
    m = params / 1e6
    return f"{m:,.2f}" if m >= 1 else f"{m:.4f}"


def table1(
    arms: list[Arm], orders: dict[str, list[str]], m: Metrics, ev: Evidence | Pool | None = None
) -> Table:
    """Table 1 of 004: Method, Params (M), F1 (%), and F1 by language vitality (Low, Mid, High)."""
    pool = as_pool(arms, orders, ev)
    rows: list[list[Any]] = []
    last_block = None
    for arm in arms:
        block = BLOCKS.get(arm.method)
        if block and block != last_block:
            rows.append([block])
        last_block = block
        name = f"r = {arm.rank}" if arm.rank is not None else arm.label
        groups = [cell(_group(arm, pool, "resource", c), 100) for c in RESOURCE_COLUMNS]
        rows.append([name, _millions(arm.params), cell(m[arm.label]["final"], 100), *groups])
    cols = ", ".join(f"{c} = Joshi {k}" for c, k in RESOURCE_COLUMNS.items())
    return Table(
        "table1_methods",
        "Table 1: trainable parameters and final score by method",
        ["Method", "Params (M)", "F1 (%)", "Low", "Mid", "High"],
        rows,
        caption=f"Score after the last step, all languages, mean over orders{_over(pool)}. "
        "Vitality columns: "
        f"{cols}; N/A where no task language is in the class. MONO and NON-SHARED LoRA count one "
        "model/adapter per language.",
        floatfmt=".2f",
    )


def _over(pool: Pool) -> str:
    """What a table's numbers are averaged over besides the orders (nothing with one seed)."""
    return f" and over {len(pool.runs)} training seeds" if pool.several else ""


def table2(arms: list[Arm], m: Metrics, pool: Pool | None = None) -> Table:
    """Table 2 of 004: CBT and CFT for VANILLA and each SHARED LoRA rank."""
    rows: list[list[Any]] = [
        [a.label, cell(m[a.label]["cbt"]), cell(m[a.label]["cft"])]
        for a in arms
        if a.method == "vanilla"
    ]
    shared = [a for a in arms if a.method == "shared_lora"]
    if shared:
        rows.append(["SHARED LoRA"])
        rows += [
            [f"r = {a.rank}", cell(m[a.label]["cbt"]), cell(m[a.label]["cft"])] for a in shared
        ]
    return Table(
        "table2_transfer",
        "Table 2: CBT and CFT (higher is better)",
        ["Method", "CBT", "CFT"],
        rows,
        caption="CBT (eq. 12) reads R_{T-1,i} as the row after the last step; CFT eqs. 10-11. Mean "
        f"over orders{_over(pool) if pool else ''}.",
    )


def variants_table(arms: list[Arm], m: Metrics, pool: Pool | None = None) -> Table:
    rows = [[a.label, *[cell(m[a.label][k]) for k, _ in METRICS]] for a in arms]
    return Table(
        "transfer_variants",
        "All transfer and forgetting metrics by method",
        ["Method", *[n for _, n in METRICS]],
        rows,
        caption=f"Scores as fractions, mean over orders{_over(pool) if pool else ''}. BWT (GEM) = "
        "CBT; forgetting after learning "
        "= -BWT; the forgetting variants differ in the rows the best score is taken over "
        "(docs/metrics.md); FWT against the untrained classifier.",
    )


def analysis_tables(
    arms: list[Arm], orders: dict[str, list[str]], hops: int, ev: Evidence | Pool | None
) -> list[Table]:
    pool = as_pool(arms, orders, ev)
    by_group: list[list[Any]] = []
    for arm in arms:
        finals = pool.lang_values(arm, final_scores)
        row: list[Any] = [arm.label]
        for by in ("script", "resource", "family"):
            names = group_means(finals, by)
            row.append("; ".join(f"{g} {_pct_text(_group(arm, pool, by, g))}" for g in names))
        by_group.append(row)
    tables = [
        Table(
            "by_group",
            "Final score (%) by script, resource class and family",
            ["Method", "script", "resource", "family"],
            by_group,
            caption="Resource classes: "
            f"{', '.join(f'{c} = Joshi {k}' for c, k in RESOURCE_COLUMNS.items())}."
            + (f" Mean over orders{_over(pool)}." if pool.several else ""),
        )
    ]
    tr_rows = [
        [a.label, *_script_cells(a, pool, hops)]
        for a in arms
        if a.method in ("vanilla", "shared_lora")
    ]
    if tr_rows:
        tables.append(
            Table(
                "transfer_by_script",
                "Mean MFT / MBT over hops, Latin vs non-Latin scripts",
                ["Method", "MFT Latin", "MFT non-Latin", "MBT Latin", "MBT non-Latin"],
                tr_rows,
                floatfmt=".4f",
                caption=f"Mean over orders{_over(pool)}." if pool.several else "",
            )
        )
    return tables


def _pct_text(r: Replicates) -> str:
    c = cell(r, 100)
    return c.text(".1f") if isinstance(c, Estimate) else f"{c:.1f}"


def _script_cells(arm: Arm, pool: Pool, hops: int) -> list[Any]:
    out: list[Any] = []
    for kind in ("mft", "mbt"):
        for g in ("Latin", "non-Latin"):

            def fn(
                rs: Mapping[str, np.ndarray],
                orders: Mapping[str, list[str]],
                kind: Kind = kind,
                g: str = g,
            ) -> float:
                vals = hop_average(multi_hop(rs, orders, hops, kind))
                return group_means(vals, "script").get(g, math.nan)

            out.append(cell(pool.quantity(arm, fn)))
    return out


def donor_table(
    arm: Arm, orders: dict[str, list[str]], hops: int, pool: Pool | None = None
) -> Table:
    if pool is None or not pool.several:
        pl = per_language(arm, orders, hops)
        mft, mbt = hop_average(pl["mft"]), hop_average(pl["mbt"])
    else:
        mft, mbt = (
            pool.lang_values(arm, hop_means(hops, "mft")),
            pool.lang_values(arm, hop_means(hops, "mbt")),
        )
    donors, receivers = ranking(mft), ranking(mbt)
    rows = [
        [i + 1, d[0], d[1], r[0], r[1]]
        for i, (d, r) in enumerate(zip(donors, receivers, strict=True))
    ]
    return Table(
        f"donors_{arm.method}_{arm.rank}",
        f"Donors (mean MFT) and receivers (mean MBT), {arm.label}",
        ["rank", "donor", "MFT", "receiver", "MBT"],
        rows,
        floatfmt=".4f",
        caption=f"Mean over hops 0..{hops} and over orders{_over(pool) if pool else ''} "
        "(section 5: MFT = donating, MBT = receiving).",
    )


def cost_table(arms: list[Arm], pool: Pool | None = None) -> Table:
    if pool is not None and pool.several:
        summed = [
            replace(
                a,
                seconds={
                    k: sum(r.arm(a.label).seconds.get(k, 0.0) for r in pool.runs) for k in a.seconds
                },
            )
            for a in arms
        ]
        t = cost_table(summed)
        t.caption = f"Summed over the {len(pool.runs)} training seeds."
        return t
    return Table(
        "cost",
        "Training and evaluation time by method",
        ["Method", "train s", "eval s", "train ex/s", "eval ex/s"],
        [
            [
                a.label,
                a.seconds["train_seconds"],
                a.seconds["eval_seconds"],
                a.seconds["train_examples_seen"] / max(1e-9, a.seconds["train_seconds"]),
                a.seconds["eval_examples"] / max(1e-9, a.seconds["eval_seconds"]),
            ]
            for a in arms
        ],
    )


def _untrained(scores: dict[str, float], ev: Evidence | None) -> Replicates | None:
    if not scores:
        return None
    point = float(np.mean(list(scores.values())))
    if ev is None or not ev.untrained:
        return Replicates(point, np.array([]), 0)
    return Replicates(point, np.mean(list(ev.untrained.values()), axis=0), ev.n, ev.level)


def _pooled_untrained(pool: Pool) -> Replicates | None:
    per_seed = [_untrained(r.untrained, r.ev) for r in pool.runs]
    if any(u is None for u in per_seed):
        return None
    return pool.pooled([u for u in per_seed if u is not None])


def _intro(cfg: LifelongConfig, arms: list[Arm], pool: Pool) -> str:
    text = (
        f"Task '{cfg.task.name}' ({cfg.task.kind}, {cfg.task.metric}) on "
        f"{', '.join(cfg.languages)}; base {cfg.base.describe()}. Methods: "
        f"{', '.join(a.label for a in arms)}. R matrices (CSV and .npy) are in results/R/. "
    )
    ev = pool.evidence
    if ev is None or any(r.ev is None for r in pool.runs):
        return text + "No per-item evidence was found: numbers are shown without intervals."
    pct = round(100 * ev.level)
    if pool.several:
        later = ", ".join(f"_seed{s}" for s in pool.seeds[1:])
        return text + (
            f"Later seeds' matrices end in {later}. Every number is the mean over the "
            f"{len(pool.runs)} training seeds; ± is half the width of the {pct}% interval "
            "mean ± t × SE over the seeds and the test items "
            f"({ev.n} items per seed, {ev.n_resamples} resamples, seed {cfg.bootstrap.seed}): "
            "SE² adds the variance of a bootstrap of the mean over seeds, one resample of the "
            "test items (one draw per language) shared by every seed as the seeds share the "
            "test items, and s²/k, the variance of the k per-seed values over k; t has "
            "Welch-Satterthwaite degrees of freedom, so with few seeds the interval is as wide "
            "as a t-interval over them. Every arm is read on the same draws and differences "
            "are taken seed by seed, so they are paired over seeds and items."
        )
    return text + (
        f"± is half the width of the {pct}% percentile interval of a bootstrap over the test items "
        f"({ev.n} items, {ev.n_resamples} resamples, seed {cfg.bootstrap.seed}): each replicate "
        "draws one resample per language and recomputes every entry of every R on it, so "
        "differences between arms are paired."
    )


def seed_variance_note(cfg: LifelongConfig) -> str:
    """Which sources of variance the intervals cover: seeds and items with several seeds
    (no seed-noise band then), items only with one (:func:`variance_note`)."""
    seeds = seed_list(cfg)
    if len(seeds) == 1:
        return variance_note(cfg)
    return (
        f"Intervals and paired tests cover training seeds and test items: {len(seeds)} "
        f"training seeds ({', '.join(map(str, seeds))}), resampled together with each seed's "
        "test items (item bootstrap variance plus the variance over seeds, Student t with "
        "Welch-Satterthwaite degrees of freedom); no seed-noise band applies, as the intervals "
        "hold the seeds themselves."
    )


def _seed_run(cfg: LifelongConfig, run: RunTable, seed: int) -> SeedRun:
    """One training seed's orders, arms, item evidence and untrained scores."""
    positions = run.scores(metric="order_position")
    orders = read_orders(positions)
    arms = collect_arms(cfg, run, orders)
    ev = attach_evidence(cfg, run, arms, orders)
    return SeedRun(seed, orders, arms, ev, untrained_scores(run, cfg.task.metric), positions)


def seed_runs(cfg: LifelongConfig, run: RunTable) -> list[SeedRun]:
    """The run read per training seed (one seed: the run as it is)."""
    seeds = seed_list(cfg)
    if len(seeds) == 1:
        return [_seed_run(cfg, run, seeds[0])]
    tagged = seeded_run(run, seeds)
    return [_seed_run(cfg, seed_view(tagged, s, seeds), s) for s in seeds]


def _order_bullets(cfg: LifelongConfig, pool: Pool) -> list[str]:
    """The first seed's orders; an order that differs in a later seed (a destructive order
    measured on that seed's arms) gets that seed's languages as well."""
    first = pool.runs[0]
    lines = order_lines(cfg, first.positions, first.orders)
    for i, name in enumerate(first.orders):
        other = [
            f"seed {r.seed}: {' → '.join(r.orders.get(name, []))}"
            for r in pool.runs[1:]
            if r.orders.get(name) != first.orders[name]
        ]
        if other:
            lines[i] += f" (seed {first.seed}; " + "; ".join(other) + ")"
    return lines


def build_report(cfg: LifelongConfig, run_dir: Path) -> Path:
    run = load_run(run_dir)  # every record of the run, read once
    pool = Pool(seed_runs(cfg, run))
    orders, arms = pool.orders, pool.arms
    hops = min(cfg.hops, max(0, len(cfg.languages) - 2))  # MFT_h, MBT_h need h <= T-2
    for i, r in enumerate(pool.runs):
        suffix = f"_seed{r.seed}" if i else ""
        save_matrices(r.arms, r.orders, run_dir / "results" / "R", suffix)
    m = pool.metrics()
    rep = Report(
        f"{cfg.name}: sequential learning over {len(cfg.languages)} languages ({cite('004')})",
        banner=banner_of(cfg, run_dir),
    )
    rep.paragraph(_intro(cfg, arms, pool) + " " + seed_variance_note(cfg))
    ok = learned_arms(arms, pool, cfg.task.metric)
    claims = method_claims(arms, m, ok) + baseline_claims(arms, m, ok)
    for arm in (a for a in arms if a.method == "vanilla"):
        claims += script_claims(arm, orders, hops, pool, ok)
    claims = with_headroom(claims, headroom_of(pool, cfg.task.metric))
    claims = missing_arms_aside(correct(with_seed_band(claims, cfg)), run_dir)
    rep.claims(claims)
    write_table(run_dir / "results", claims_table(claims))
    tables: list[Table] = []
    learned = baselines(arms, m, pool, cfg.task.metric, _pooled_untrained(pool))
    if learned is not None:
        rep.heading("Did the task models learn?", 2)
        rep.table(learned)
        tables.append(learned)
    rep.heading("Orders", 2)
    rep.bullets(_order_bullets(cfg, pool))
    rep.heading("Tables", 2)
    main = [table1(arms, orders, m, pool), table2(arms, m, pool), variants_table(arms, m, pool)]
    for t in main:
        rep.table(t)
    rep.heading("Language analysis", 2)
    extra = analysis_tables(arms, orders, hops, pool)
    extra += [
        donor_table(a, orders, hops, pool) for a in arms if a.method in ("vanilla", "shared_lora")
    ]
    for t in extra:
        rep.table(t)
    rep.heading("Cost", 2)
    rep.table(cost_table(arms, pool))
    rep.heading("Figures", 2)
    figures(rep, arms, orders, hops, run_dir, cfg.shift, pool)
    first = next((a for a in arms if a.method == "vanilla"), None)
    if first is not None:
        name = next(iter(first.Rs))
        labels = [f"{i}:{lang}" for i, lang in enumerate(orders[name])]
        R, note = pool.matrix(first.label, name)
        rep.table(
            matrix_table(
                R,
                labels,
                orders[name],
                "R_vanilla",
                f"R for VANILLA, order {name}" + (f", {note}" if note else ""),
                corner="after step",
            )
        )
    for t in [*tables, *main, *extra]:
        write_table(run_dir / "results", t)
    run_health(rep, run_dir)
    compute_table(rep, run_dir)
    md, _ = rep.write(run_dir)
    return md

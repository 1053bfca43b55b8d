"""The lifelong report: Tables 1-2 of paper 004, Figures 2, 3, 5, 6, 7, language analysis, comparison."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from polymnesia.continual.analysis import RESOURCE_COLUMNS, group_means, hop_average, ranking
from polymnesia.experiments.lifelong.config import LifelongConfig
from polymnesia.experiments.lifelong.results import (
    Arm,
    arm_metrics,
    average_curve,
    collect_arms,
    final_by_language,
    per_language,
    read_orders,
    save_matrices,
    untrained_scores,
)
from polymnesia.reports import plots
from polymnesia.reports.render import Report
from polymnesia.reports.tables import Table, matrix_table
from polymnesia.results import read_scores

BLOCKS = {"shared_lora": "SHARED LoRA", "nonshared_lora": "NON-SHARED LoRA"}


def _pct(v: float) -> float:
    return round(100 * v, 2) if not math.isnan(v) else math.nan


def table1(arms: list[Arm], orders: dict[str, list[str]]) -> Table:
    """Table 1 of 004: Method, Params (M), F1 (%), and F1 by language vitality (Low, Mid, High)."""
    rows: list[list[Any]] = []
    last_block = None
    for arm in arms:
        final = final_by_language(arm, orders)
        res = group_means(final, "resource")
        block = BLOCKS.get(arm.method)
        if block and block != last_block:
            rows.append([block])
        last_block = block
        name = f"r = {arm.rank}" if arm.rank is not None else arm.label
        rows.append(
            [name, round(arm.params / 1e6, 4), _pct(float(np.mean(list(final.values()))))]
            + [_pct(res.get(c, math.nan)) for c in RESOURCE_COLUMNS]
        )
    cols = ", ".join(f"{c} = Joshi {k}" for c, k in RESOURCE_COLUMNS.items())
    return Table(
        "table1_methods", "Table 1: trainable parameters and final score by method",
        ["Method", "Params (M)", "F1 (%)", "Low", "Mid", "High"], rows,
        caption=f"Score after the last step, all languages, mean over orders. Vitality columns: {cols}; "
        "N/A where no task language is in the class. MONO and NON-SHARED LoRA count one model/adapter per language.",
    )  # fmt: skip


def table2(arms: list[Arm], metrics: dict[str, dict[str, float]]) -> Table:
    """Table 2 of 004: CBT and CFT for VANILLA and each SHARED LoRA rank."""
    rows: list[list[Any]] = []
    for arm in arms:
        if arm.method == "vanilla":
            rows.append([arm.label, metrics[arm.label]["cbt"], metrics[arm.label]["cft"]])
    shared = [a for a in arms if a.method == "shared_lora"]
    if shared:
        rows.append(["SHARED LoRA"])
        rows += [
            [f"r = {a.rank}", metrics[a.label]["cbt"], metrics[a.label]["cft"]] for a in shared
        ]
    return Table(
        "table2_transfer", "Table 2: CBT and CFT (higher is better)", ["Method", "CBT", "CFT"], rows,
        caption="CBT (eq. 12) reads R_{T-1,i} as the row after the last step; CFT eqs. 10-11. Mean over orders.",
    )  # fmt: skip


VARIANTS = [
    ("final", "final avg"),
    ("cbt", "CBT"),
    ("cbt_paper_row", "CBT (row T-1)"),
    ("cft", "CFT"),
    ("bwt_gem", "BWT (GEM)"),
    ("forgetting_from_first", "forgetting (first)"),
    ("forgetting_from_best", "forgetting (best)"),
    ("fwt_vs_untrained", "FWT (vs untrained)"),
    ("mean_average_learned", "mean P_t"),
]


def variants_table(arms: list[Arm], metrics: dict[str, dict[str, float]]) -> Table:
    rows = [[a.label, *[metrics[a.label][k] for k, _ in VARIANTS]] for a in arms]
    return Table(
        "transfer_variants", "All transfer and forgetting metrics by method",
        ["Method", *[n for _, n in VARIANTS]], rows,
        caption="Scores as fractions, mean over orders. BWT (GEM) = CBT; forgetting (first) = -BWT; "
        "FWT against the untrained classifier. See docs/lifelong.md for each definition.",
    )  # fmt: skip


def analysis_tables(arms: list[Arm], orders: dict[str, list[str]], hops: int) -> list[Table]:
    by_group: list[list[Any]] = []
    groups = ["script", "resource", "family"]
    for arm in arms:
        final = final_by_language(arm, orders)
        row: list[Any] = [arm.label]
        for g in groups:
            gm = group_means(final, g)  # type: ignore[arg-type]
            row.append("; ".join(f"{k} {_pct(v):.1f}" for k, v in gm.items()))
        by_group.append(row)
    tables = [
        Table("by_group", "Final score (%) by script, resource class and family", ["Method", "script", "resource", "family"], by_group,
              caption=f"Resource classes: {', '.join(f'{c} = Joshi {k}' for c, k in RESOURCE_COLUMNS.items())}.")
    ]  # fmt: skip
    seq = [a for a in arms if a.method in ("vanilla", "shared_lora")]
    tr_rows = []
    for arm in seq:
        pl = per_language(arm, orders, hops)
        mft, mbt = hop_average(pl["mft"]), hop_average(pl["mbt"])
        row = [arm.label]
        for vals in (mft, mbt):
            gm = group_means(vals, "script")
            row += [gm.get("Latin", math.nan), gm.get("non-Latin", math.nan)]
        tr_rows.append(row)
    if tr_rows:
        tables.append(
            Table("transfer_by_script", "Mean MFT / MBT over hops, Latin vs non-Latin scripts",
                  ["Method", "MFT Latin", "MFT non-Latin", "MBT Latin", "MBT non-Latin"], tr_rows)
        )  # fmt: skip
    return tables


def donor_table(arm: Arm, orders: dict[str, list[str]], hops: int) -> Table:
    pl = per_language(arm, orders, hops)
    donors, receivers = ranking(hop_average(pl["mft"])), ranking(hop_average(pl["mbt"]))
    rows = [
        [i + 1, d[0], d[1], r[0], r[1]]
        for i, (d, r) in enumerate(zip(donors, receivers, strict=True))
    ]
    return Table(
        f"donors_{arm.method}_{arm.rank}", f"Donors (mean MFT) and receivers (mean MBT), {arm.label}",
        ["rank", "donor", "MFT", "receiver", "MBT"], rows,
        caption=f"Mean over hops 0..{hops} and over orders (section 5: MFT = donating, MBT = receiving).",
    )  # fmt: skip


def figures(
    rep: Report, arms: list[Arm], orders: dict[str, list[str]], hops: int, run_dir: Path
) -> None:
    fig_dir = run_dir / "figures"
    T = len(next(iter(orders.values())))
    series = {a.label: (list(range(1, T + 1)), list(100 * average_curve(a))) for a in arms}
    plots.line_plot(series, fig_dir / "fig2_average_over_steps.png", xlabel="step", ylabel="average score over learned languages (%)",
                    title="Figure 2: average score after each step (mean over orders)")  # fmt: skip
    rep.image(
        "figures/fig2_average_over_steps.png",
        "Figure 2: average over learned languages after each step",
    )
    for arm in arms:
        if arm.method not in ("vanilla", "shared_lora"):
            continue
        stem = f"{arm.method}_r{arm.rank}" if arm.rank else arm.method
        pl = per_language(arm, orders, hops)
        change = {k: -v for k, v in pl["shift"].items() if not math.isnan(v)}
        if change:
            plots.bar_plot(change, fig_dir / f"fig3_change_{stem}.png", signed_colors=True, sort=True, fmt=".3f",
                           ylabel="performance change (-P_avg)", title=f"Figure 3: change caused by each language, {arm.label}")  # fmt: skip
            rep.image(
                f"figures/fig3_change_{stem}.png",
                f"Figure 3 ({arm.label}): performance change after training each language",
            )
        for kind, fig in (("mbt", 5), ("mft", 6)):
            avg = hop_average(pl[kind])
            langs = [lang for lang, _ in ranking(avg)]
            mat = np.array([[pl[kind][lang][h] for lang in langs] for h in range(hops + 1)])
            plots.heatmap(mat, [str(h) for h in range(hops + 1)], langs, fig_dir / f"fig{fig}_{kind}_{stem}.png", center=0.0,
                          xlabel="language (sorted by average)", ylabel="hop", title=f"Figure {fig}: {kind.upper()}, {arm.label}")  # fmt: skip
            rep.image(
                f"figures/fig{fig}_{kind}_{stem}.png",
                f"Figure {fig}: {kind.upper()} by language and hop, {arm.label}",
            )
        for name, R in arm.Rs.items():
            order = orders[name]
            plots.heatmap(R, [f"{i}:{lang}" for i, lang in enumerate(order)], order, fig_dir / f"fig7_R_{stem}_{name}.png",
                          xlabel="evaluated language", ylabel="after step", title=f"Figure 7: R, {arm.label}, order {name}")  # fmt: skip
            rep.image(
                f"figures/fig7_R_{stem}_{name}.png", f"Figure 7: R for {arm.label}, order {name}"
            )


def comparison(
    arms: list[Arm], metrics: dict[str, dict[str, float]], orders: dict[str, list[str]], hops: int
) -> list[str]:
    """The paper's findings checked against this run's numbers, each marked holds / does not hold."""
    by = {a.method + (f"_{a.rank}" if a.rank else ""): a for a in arms}
    m = {a.label: metrics[a.label] for a in arms}
    out = []

    def say(claim: str, ok: bool, numbers: str) -> None:
        out.append(f"{claim}: **{'holds' if ok else 'does not hold'} here** ({numbers})")

    if "vanilla" in by:
        v = m[by["vanilla"].label]
        say("VANILLA forgets (CBT < 0; paper -0.08)", v["cbt"] < 0, f"CBT {v['cbt']:.3f}")
        for a in (a for a in arms if a.method == "shared_lora"):
            say(
                f"{a.label} forgets more than VANILLA (paper -0.12 to -0.14)",
                m[a.label]["cbt"] < v["cbt"],
                f"CBT {m[a.label]['cbt']:.3f} vs {v['cbt']:.3f}",
            )
        for a in (a for a in arms if a.method == "nonshared_lora"):
            say(
                f"{a.label} resists forgetting better than VANILLA (final score)",
                m[a.label]["final"] > v["final"],
                f"final {m[a.label]['final']:.3f} vs {v['final']:.3f}",
            )
        pl = per_language(by["vanilla"], orders, hops)
        gm = group_means(hop_average(pl["mbt"]), "script")
        if "Latin" in gm and "non-Latin" in gm:
            say(
                "non-Latin scripts are more fragile receivers (lower MBT)",
                gm["non-Latin"] < gm["Latin"],
                f"MBT non-Latin {gm['non-Latin']:.4f} vs Latin {gm['Latin']:.4f}",
            )
    if "multi" in by:
        best = max(arms, key=lambda a: m[a.label]["final"])
        say(
            "MULTI has the best final score (paper 75.03%)",
            best.method == "multi",
            f"best: {best.label} {m[best.label]['final']:.3f}; MULTI {m[by['multi'].label]['final']:.3f}",
        )
    return out  # fmt: skip


def build_report(cfg: LifelongConfig, run_dir: Path) -> Path:
    scores = read_scores(run_dir / "results" / "scores.jsonl")
    orders = read_orders(scores)
    arms = collect_arms(cfg, scores, orders, run_dir / "stages")
    hops = min(cfg.hops, max(0, len(cfg.languages) - 2))  # MFT_h, MBT_h need h <= T-2
    save_matrices(arms, orders, run_dir / "results" / "R")
    b = untrained_scores(scores, cfg.task.metric)
    metrics = {a.label: arm_metrics(a, orders, b) for a in arms}
    rep = Report(f"{cfg.name}: sequential learning over {len(cfg.languages)} languages (paper 004)")
    rep.paragraph(
        f"Task '{cfg.task.name}' ({cfg.task.kind}, {cfg.task.metric}) on {', '.join(cfg.languages)}; base "
        f"{cfg.base.model.preset or cfg.base.model.name_or_path} pretrained on {', '.join(cfg.base.languages)}. "
        f"Methods: {', '.join(a.label for a in arms)}. R matrices (CSV and .npy) are in results/R/."
    )
    rep.heading("Orders", 2)
    rep.bullets([f"{n}: {' → '.join(o)}" for n, o in orders.items()])
    rep.heading("Tables", 2)
    rep.table(table1(arms, orders))
    rep.table(table2(arms, metrics))
    rep.table(variants_table(arms, metrics))
    rep.heading("Comparison with the paper", 2)
    rep.bullets(comparison(arms, metrics, orders, hops))
    rep.heading("Language analysis", 2)
    for t in analysis_tables(arms, orders, hops):
        rep.table(t)
    for arm in arms:
        if arm.method in ("vanilla", "shared_lora"):
            rep.table(donor_table(arm, orders, hops))
    rep.heading("Cost", 2)
    rep.table(Table("cost", "Training and evaluation time by method", ["Method", "train s", "eval s", "train ex/s", "eval ex/s"],
                    [[a.label, a.seconds["train_seconds"], a.seconds["eval_seconds"],
                      a.seconds["train_examples_seen"] / max(1e-9, a.seconds["train_seconds"]),
                      a.seconds["eval_examples"] / max(1e-9, a.seconds["eval_seconds"])] for a in arms]))  # fmt: skip
    rep.heading("Figures", 2)
    figures(rep, arms, orders, hops, run_dir)
    first = next((a for a in arms if a.method == "vanilla"), None)
    if first is not None:
        name = next(iter(first.Rs))
        order = orders[name]
        rep.table(
            matrix_table(
                first.Rs[name],
                [f"{i}:{lang}" for i, lang in enumerate(order)],
                order,
                "R_vanilla",
                f"R for VANILLA, order {name}",
                corner="after step",
            )
        )
    md, _ = rep.write(run_dir)
    return md

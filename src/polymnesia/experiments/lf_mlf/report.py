"""The ``lf_mlf`` report: Mao et al. 2022's tables (1-6), forgetting, Figure 2 (CD), 3-4 (sweep), 5a
(branches).

Everything is recomputed from ``results/scores.jsonl`` and the stages'
``items.jsonl``. Per-seed values are averaged first (over target languages for
zero-shot), then mean and std over seeds; marks "●" come from a two-sided
paired t-test (pairing by seed) of LF-MLF against each method at 0.05, set
where LF-MLF is significantly better. With one seed there is no spread and no
t-test: cells carry a bootstrap interval over test items instead, and the
claims use the paired bootstrap over items. The claims block
(:mod:`polymnesia.experiments.lf_mlf.claims`) comes first; sections with
nothing to show are left out.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from polymnesia.errors import PolymnesiaError
from polymnesia.experiments.base import banner_of
from polymnesia.experiments.lf_mlf.baselines import baseline_rows, trivial_rows
from polymnesia.experiments.lf_mlf.claims import (
    BASE,
    all_claims,
    forgetting_by_task,
    transfer_checks,
)
from polymnesia.experiments.lf_mlf.config import REFERENCE, LFMLFConfig, TaskSection, label_of
from polymnesia.experiments.papers import cite
from polymnesia.experiments.reporting import missing_arms_aside, training_curves
from polymnesia.experiments.seeds import with_seed_band
from polymnesia.metrics.lm import forgetting
from polymnesia.metrics.stats import (
    default_blocks,
    friedman_by_blocks,
    significance_marks,
)
from polymnesia.reports.baselines import baseline_table, trivial_table
from polymnesia.reports.cd_diagram import plot_cd_diagram
from polymnesia.reports.claims import correct
from polymnesia.reports.claims_table import claims_block_table, claims_table
from polymnesia.reports.curves import line_plot
from polymnesia.reports.frame import load_run
from polymnesia.reports.heatmaps import heatmap, shared_limits
from polymnesia.reports.render import Report
from polymnesia.reports.table_core import Table
from polymnesia.reports.tables import seed_table, write_table
from polymnesia.reports.verdicts import p_text
from polymnesia.results import Score, filter_scores

LEGEND = (
    "● LF-MLF is statistically superior (paired t-test over seeds at 0.05), as "
    f"{cite('003')}, Tables 1-3, mark it."
)


def _seed_means(scores: list[Score]) -> dict[str, dict[int, float]]:
    """model -> seed -> mean value over the scores given (e.g. over target languages)."""
    acc: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for s in scores:
        acc[s.model][int(s.seed or 0)].append(s.value)
    return {m: {k: float(np.mean(v)) for k, v in by.items()} for m, by in acc.items()}


def _marks(per_seed: dict[str, dict[int, float]], higher: bool = True) -> dict[str, str]:
    if REFERENCE not in per_seed:
        return {}
    seeds = sorted(per_seed[REFERENCE])
    usable = {m: [v[s] for s in seeds] for m, v in per_seed.items() if all(s in v for s in seeds)}
    if len(seeds) < 2:
        return {}
    return significance_marks(usable, reference=REFERENCE, higher_is_better=higher)


def _slf_as_row(scores: list[Score]) -> list[Score]:
    """SLF-xx models scored on their own language xx become one row "SLF" (Tables 4-6)."""
    from dataclasses import replace

    return [replace(s, model="SLF") for s in scores if s.model == f"SLF-{s.lang}"]


def _suffix(cfg: LFMLFConfig, task: TaskSection) -> str:
    return f"_{task.name}" if len(cfg.task_list()) > 1 else ""


def _show(rep: Report, run_dir: Path, table: Table) -> None:
    """Write ``table`` to ``results/`` (CSV and Markdown) and add it to the report."""
    write_table(run_dir / "results", table)
    rep.table(table)


def zero_shot_table(
    rep: Report, run_dir: Path, cfg: LFMLFConfig, task: TaskSection, scores: list[Score]
) -> None:
    metric = task.metric
    tgt = filter_scores(scores, metric=metric, group="target", setting="main", task=task.name)
    if not tgt:
        return
    sources = cfg.sources_of(task)
    order = [label_of(m) for m in cfg.methods] + [f"SLF-{s}" for s in sources]
    n_targets = len(cfg.target_langs(sources, task))
    table = seed_table(
        tgt,
        metric,
        col_key="task",
        row_order=order,
        marks=_marks(_seed_means(tgt)),
        best=None,  # seed_table bolds per row; the paper bolds per column
        name=f"zero_shot{_suffix(cfg, task)}",
        title=f"Zero-shot performance on {task.name} ({metric}, "
        + (
            f"averaged over {n_targets} target languages)"
            if n_targets != 1
            else "1 target language)"
        ),
        caption=f"{cite('003')}, Tables 1-3 layout.",
        legend=LEGEND,
    )
    _show(rep, run_dir, table)


def finetune_table(
    rep: Report, run_dir: Path, cfg: LFMLFConfig, task: TaskSection, scores: list[Score]
) -> None:
    metric = task.metric
    src = filter_scores(scores, metric=metric, group="source", setting="main", task=task.name)
    rows = [s for s in src if not s.model.startswith("SLF-")] + _slf_as_row(src)
    if not rows:
        return
    marks: dict[str, str] = {}
    sources = cfg.sources_of(task)
    for lang in sources:
        for m, mark in _marks(_seed_means([s for s in rows if s.lang == lang])).items():
            marks[f"{m}|{lang}"] = mark
    table = seed_table(
        rows,
        metric,
        row_order=[*(label_of(m) for m in cfg.methods), "SLF"],
        col_order=sources,
        marks=marks,
        best=None,
        name=f"fine_tuning{_suffix(cfg, task)}",
        title=f"Fine-tuning performance on {task.name} ({metric}) per source language",
        caption=f"{cite('003')}, Tables 4-6; SLF: each column from the model fine-tuned on "
        "that language alone.",
        legend=LEGEND,
    )
    _show(rep, run_dir, table)


def baselines(
    rep: Report,
    run_dir: Path,
    cfg: LFMLFConfig,
    task: TaskSection,
    scores: list[Score],
    items: list,
) -> None:
    """Each arm's score on its training languages against chance and majority (is it learning?)."""
    trivial = trivial_rows(cfg, task, scores, items)
    if trivial:
        _show(rep, run_dir, trivial_table(trivial, name=f"baselines{_suffix(cfg, task)}"))
        main = [r for r in trivial if r[2] == task.metric]
        above = sum(iv.low > v for _, _, _, iv, _, v in main)
        text = (
            f"{above} of {len(main)} arms score above the trivial answer with an interval above it "
            f"on {task.metric}; an arm that does not has not learned this task at this run's size."
        )
        words = [r for r in trivial if r[2] != task.metric]
        if words:
            up = sum(iv.low > v for _, _, _, iv, _, v in words)
            text += (
                " Word tag accuracy (span F1 needs every word of a span right, so it can stay near "
                f"0 while words are learned): {up} of {len(words)} arms above the most frequent "
                "tag's accuracy."
            )
        rep.paragraph(text)
    checks = list(transfer_checks(cfg, task, scores, items).values())
    if checks:
        table = claims_block_table(checks, "Check")
        table.name = f"transfer{_suffix(cfg, task)}"
        table.title = "Did the models transfer? Zero-shot score against the trivial score"
        _show(rep, run_dir, table)
        up = sum(c.verdict == "holds" for c in checks)
        rep.paragraph(
            f"{up} of {len(checks)} arms score above the trivial score on the targets with an "
            "interval above it; a zero-shot claim between two arms that both do not is not "
            "testable."
        )
    rows = baseline_rows(cfg, task, scores, items)
    if not rows:
        return
    table = baseline_table(rows, name=f"baselines{_suffix(cfg, task)}")
    _show(rep, run_dir, table)
    ratios = [iv.estimate / base.majority(metric) for _, _, metric, iv, base in rows]
    rep.paragraph(
        "Learned-above-chance check: score >= 2x the majority-class baseline with an interval "
        f"above it: {sum(r >= 2 for r in ratios)} of {len(rows)} arms reach 2x (ratios "
        f"{min(ratios):.2f} to {max(ratios):.2f})."
    )


#: F_p per pre-training loss (metric of the fine-tuned arms' loss -> F_p's metric, table name,
#: loss and unit); a run has one base model, so one of them, but they are never one table
FORGETTING = {
    "lm_loss": ("forgetting", "forgetting", "causal-LM loss, nats/token"),
    "mlm_loss": ("forgetting_mlm", "forgetting_mlm", "masked-LM loss, nats/masked token"),
}


def _base_losses(scores: list[Score], loss: str) -> dict[str, float]:
    """L_p(theta_p) per language: the base model's ``loss`` record, or for the causal loss of
    a base pretrained here (``evaluate_lm``) the log of its perplexity."""
    base = [s for s in scores if s.model == BASE]
    out = {s.lang: s.value for s in base if s.metric == loss}
    if loss == "lm_loss" and not out:
        out = {s.lang: math.log(s.value) for s in base if s.metric == "perplexity"}
    return out


def forgetting_scores(scores: list[Score], loss: str = "lm_loss") -> list[Score]:
    """F_p = L_p(theta_f) - L_p(theta_p) per model, language and seed, for the pre-training
    ``loss`` (``lm_loss``: nats per token; ``mlm_loss``: nats per masked token)."""
    metric = FORGETTING[loss][0]
    base = _base_losses(scores, loss)
    out = []
    for s in filter_scores(scores, metric=loss, setting="main"):
        if s.lang in base:
            out.append(
                Score(
                    model=s.model,
                    lang=s.lang,
                    metric=metric,
                    value=forgetting(s.value, base[s.lang]),
                    task=s.task,
                    seed=s.seed,
                    setting="F_p",
                )
            )
    return out


def forgetting_table(rep: Report, run_dir: Path, cfg: LFMLFConfig, scores: list[Score]) -> None:
    """One F_p table per pre-training loss in the run (Section 3.1)."""
    for loss, (metric, name, what) in FORGETTING.items():
        fp = forgetting_scores(scores, loss)
        if not fp:
            continue
        head = "masked-LM head" if loss == "mlm_loss" else "LM head"
        text = (
            "Held-out test text of every data language"
            if cfg.forgetting_data is None
            else f"Held-out test text of the {cfg.forgetting_data.source} source "
            f"(forgetting_data) in {', '.join(cfg.forgetting_languages())}"
        )
        order = [label_of(m) for m in cfg.methods] + [f"SLF-{s}" for s in cfg.sources]
        several = len({s.task for s in fp}) > 1  # a column per fine-tuned task
        table = seed_table(
            fp,
            metric,
            legend="One column per fine-tuned task; the claims test each task's F_p."
            if several
            else "● LF-MLF has significantly lower F_p (paired t-test over seeds at 0.05).",
            col_key="task" if several else "setting",
            row_order=order,
            marks={} if several else _marks(_seed_means(fp), higher=False),
            best=None,
            floatfmt=".4f",
            name=name,
            title=f"Forgetting F_p = L_p(θ_f) − L_p(θ_p) ({what}, mean over languages; lower is "
            "better)",
            caption=f"{text}, fine-tuned body with the pretrained {head}.",
        )
        _show(rep, run_dir, table)


def friedman_records(cfg: LFMLFConfig, scores: list[Score]) -> list[tuple[str, str, str, float]]:
    """``(task, group:lang, method, value)`` of every main-part source and target score."""
    out = []
    for task in cfg.task_list():
        for s in filter_scores(scores, metric=task.metric, setting="main", task=task.name):
            out.append((task.name, f"{s.group}:{s.lang}", s.model, s.value))
    return out


def cd_diagram(rep: Report, run_dir: Path, cfg: LFMLFConfig, scores: list[Score]) -> None:
    """Friedman (Iman-Davenport) and Bonferroni-Dunn with tasks or languages as blocks; Figure 2."""
    methods = [label_of(m) for m in cfg.methods]
    blocks = cfg.friedman.blocks or default_blocks(len(cfg.task_list()))
    if len(methods) < 3:
        return
    try:
        res = friedman_by_blocks(friedman_records(cfg, scores), methods, blocks, cd_alpha=0.1)
    except PolymnesiaError as e:
        rep.paragraph(f"No Friedman test: {e}.")
        return
    rel = "plots/cd_diagram.png"
    (run_dir / "plots").mkdir(parents=True, exist_ok=True)
    plot_cd_diagram(
        res.ranks,
        res.cd,
        run_dir / rel,
        reference=REFERENCE if REFERENCE in res.ranks else None,
        title="Bonferroni-Dunn (control LF-MLF, alpha 0.1)",
    )
    why = (
        "one block per task, each method's score its mean over the task's source and target "
        "languages (seed-averaged), as the paper (Section 5.2.1) uses its three tasks"
        if blocks == "tasks"
        else "one block per (task, source or target language), seed-averaged. Languages as blocks "
        "make the p-value optimistic: the languages of a task are scored on the same fine-tuned "
        "models, so their rankings share each run's luck and are not the independent blocks the "
        "test assumes; counting them inflates N, F_F and the CD's 1/sqrt(N) shrinkage. The paper "
        "uses its three tasks as blocks (friedman.blocks: tasks needs at least two tasks)"
    )
    rep.paragraph(
        f"Friedman test with {blocks} as blocks ({why}): {len(res.block_names)} blocks, "
        f"{len(methods)} methods, Iman-Davenport F_F = {res.statistic:.3f} ({p_text(res.p)}; "
        "critical "
        f"value at 0.05: {res.critical:.3f}), so the null hypothesis of equal performance is "
        f"{'rejected' if res.statistic > res.critical else 'not rejected'}. Average ranks: "
        + ", ".join(f"{m} {r:.2f}" for m, r in sorted(res.ranks.items(), key=lambda kv: kv[1]))
        + f"; Bonferroni-Dunn CD at 0.1 = {res.cd:.3f}."
    )
    rep.image(
        rel, "Figure 2 layout: CD diagram of the Bonferroni-Dunn test with LF-MLF as control."
    )


def sweep_figures(
    rep: Report, run_dir: Path, cfg: LFMLFConfig, task: TaskSection, scores: list[Score]
) -> None:
    if not cfg.sweep:
        return
    metric, counts = task.metric, sorted(cfg.sweep.counts)
    scores = filter_scores(scores, task=task.name)
    slf = {s.lang: [] for s in scores}  # type: dict[str, list[float]]
    for s in filter_scores(scores, metric=metric, setting="sweep_slf", group="source"):
        if s.model == f"SLF-{s.lang}":
            slf[s.lang].append(s.value)
    zs: dict[str, tuple[list[float], list[float]]] = {}
    rt: dict[str, tuple[list[float], list[float]]] = {}
    for m in cfg.sweep.methods:
        lab = label_of(m)
        for k in counts:
            part = filter_scores(scores, metric=metric, setting=f"top{k}", model=lab)
            tg, sc = (
                [s.value for s in part if s.group == "target"],
                [s for s in part if s.group == "source"],
            )
            if tg:
                zs.setdefault(lab, ([], []))[0].append(k)
                zs[lab][1].append(float(np.mean(tg)))
            ratios = [
                s.value / np.mean(slf[s.lang])
                for s in sc
                if slf.get(s.lang) and np.mean(slf[s.lang]) > 0
            ]
            if ratios:
                rt.setdefault(lab, ([], []))[0].append(k)
                rt[lab][1].append(float(np.mean(ratios)))
    if zs:
        line_plot(
            zs,
            run_dir / f"plots/sweep_zero_shot{_suffix(cfg, task)}.png",
            xlabel="number of source languages",
            ylabel=f"zero-shot {metric}",
            title="Zero-shot vs number of sources (Figure 3)",
        )
        rep.image(
            f"plots/sweep_zero_shot{_suffix(cfg, task)}.png",
            "Zero-shot performance averaged over the fixed target set, mean over seeds.",
        )
    if rt:
        line_plot(
            rt,
            run_dir / f"plots/sweep_relative{_suffix(cfg, task)}.png",
            xlabel="number of source languages",
            ylabel="R_T",
            title="Average relative score R_T against SLF (Figure 4)",
        )
        rep.image(
            f"plots/sweep_relative{_suffix(cfg, task)}.png",
            f"R_T = 1/T sum_t S_t^m / S_t^s ({cite('003')}, Section 5.3), mean over seeds. "
            "The paper "
            "finds R_T similar for LF-MLF and Uniform-MLF and not evidently above SLF (Figure 4): "
            "a finding of no difference, shown here and not judged as a claim.",
        )
        rep.bullets(
            [
                f"{lab}: " + ", ".join(f"T={k}: R_T={v:.3f}" for k, v in zip(*xy, strict=True))
                for lab, xy in rt.items()
            ]
        )


def branch_heatmaps(
    rep: Report, run_dir: Path, cfg: LFMLFConfig, task: TaskSection, scores: list[Score]
) -> None:
    if not cfg.branches:
        return
    scores = filter_scores(scores, task=task.name)
    groups = cfg.branches.groups
    names = list(groups)
    mats: dict[str, np.ndarray] = {}
    for m in cfg.branches.methods:
        lab = label_of(m)
        mat = np.full((len(names), len(names)), np.nan)
        for i, src in enumerate(names):
            part = filter_scores(
                scores, metric=task.metric, setting=f"branch_{src}", model=lab, group="target"
            )
            for j, tgt in enumerate(names):
                vals = [s.value for s in part if s.lang in groups[tgt]]
                if i != j and vals:
                    mat[i, j] = float(np.mean(vals))
        if np.isfinite(mat).any():
            mats[m] = mat
    limits = shared_limits(mats.values())  # the methods' maps are compared: one colour scale
    for m, mat in mats.items():
        lab = label_of(m)
        rel = f"plots/branches_{m}{_suffix(cfg, task)}.png"
        heatmap(
            mat,
            names,
            names,
            run_dir / rel,
            title=f"Cross-branch zero-shot, {lab} (Figure 5a)",
            xlabel="target branch",
            ylabel="source branch",
            limits=limits,
        )
        rep.image(
            rel,
            f"{lab}: rows fine-tuned on a branch, columns zero-shot {task.metric} on another "
            "(one colour scale for every method).",
        )


def _setup(cfg: LFMLFConfig) -> str:
    base = cfg.pretrain.model.name_or_path or (
        f"a {cfg.pretrain.model.preset} decoder pretrained {cfg.pretrain.train.steps} steps on "
        f"{', '.join(cfg.pretrain.languages)}"
    )
    tasks = "; ".join(
        f"'{t.name}' ({t.kind}, {t.metric}, sources {', '.join(cfg.sources_of(t))}, "
        f"{len(cfg.target_langs(cfg.sources_of(t), t))} targets"
        + (f", constructed: {t.constructed}" if t.constructed else "")
        + ")"
        for t in cfg.task_list()
    )
    return (
        f"Tasks: {tasks}; data source '{cfg.data.source}'. Base model: {base}. "
        f"{cfg.finetune.steps} fine-tuning steps of {cfg.finetune.batch_size} examples per "
        f"language; seeds {cfg.seeds}."
    )


def write_report(cfg: LFMLFConfig, run_dir: Path) -> Path:
    run = load_run(run_dir)  # the run folder's records and items, read once
    scores, items = forgetting_by_task(cfg, run.scores(), run.items())
    rep = Report(
        f"{cfg.name}: multi-lingual fine-tuning with per-language gradients ({cite('003')})",
        banner=banner_of(cfg, run_dir),
    )
    rep.paragraph(_setup(cfg))
    claims = correct(with_seed_band(all_claims(cfg, scores, items), cfg))
    claims = missing_arms_aside(claims, run_dir)
    if claims:
        rep.claims(claims)
        write_table(run_dir / "results", claims_table(claims))
    several = len(cfg.task_list()) > 1
    if filter_scores(scores, setting="main"):  # sweep- or branch-only configs have no main arms
        for task in cfg.task_list():
            if several:
                rep.heading(f"Task {task.name}", 2)
            level = 3 if several else 2
            rep.heading("Zero-shot performance (Tables 1-3 layout)", level)
            zero_shot_table(rep, run_dir, cfg, task, scores)
            rep.heading("Fine-tuning performance (Tables 4-6 layout)", level)
            finetune_table(rep, run_dir, cfg, task, scores)
            rep.heading("Did the task models learn?", level)
            baselines(rep, run_dir, cfg, task, scores, items)
        rep.heading("Forgetting of the pretraining objective", 2)
        forgetting_table(rep, run_dir, cfg, scores)
        rep.heading("Statistical comparison (Figure 2)", 2)
        cd_diagram(rep, run_dir, cfg, scores)
    if cfg.sweep:
        rep.heading("Number of source languages (Figures 3-4)", 2)
        for task in cfg.task_list():
            sweep_figures(rep, run_dir, cfg, task, scores)
    if cfg.branches:
        rep.heading("Cross-branch transfer (Figure 5a)", 2)
        for task in cfg.task_list():
            branch_heatmaps(rep, run_dir, cfg, task, scores)
    training_curves(rep, run_dir)
    md, _ = rep.write(run_dir)
    return md

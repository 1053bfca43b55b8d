"""The report of the ``active_forgetting`` protocol: paper 000's tables, Figure 3, the claims."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polymnesia.experiments.reporting import lm_tables, training_curves
from polymnesia.reports.plots import line_plot
from polymnesia.reports.render import Report
from polymnesia.reports.tables import Table, group_means, group_table, write_table
from polymnesia.results import Score, filter_scores, mean, read_scores

ARMS = ["Baseline", "BA", "AFA"]

#: (metric, title, lower is better) of the tables after Table 1
TABLES = [
    ("self_similarity_adjusted", "Table 2: Self-similarity (anisotropy-adjusted)", True),
    ("intra_sentence_similarity_adjusted", "Table 2b: Intra-sentence similarity (adjusted)", True),
    (
        "first_pc_variance_explained_adjusted",
        "Table 2c: First-PC variance explained (adjusted)",
        True,
    ),
    ("bleu", "Table 3: English-to-X translation, BLEU", False),
    ("chrf", "Table 3b: English-to-X translation, chrF", False),
    ("accuracy", "Table 4: Zero-shot genre classification accuracy (English-only SFT)", False),
    ("macro_f1", "Table 4b: Zero-shot genre classification macro-F1", False),
]


def _lang_means(scores: Sequence[Score]) -> dict[str, float]:
    out: dict[str, list[float]] = {}
    for s in scores:
        out.setdefault(s.lang, []).append(s.value)
    return {k: mean(v) for k, v in out.items()}


def arm_groups(
    scores: Sequence[Score],
    metric: str,
    arm: str,
    groups: dict[str, list[str]],
    size: str | None = None,
) -> dict[str, float]:
    chosen = [
        s for s in filter_scores(scores, metric=metric, model=arm) if size is None or s.size == size
    ]
    return group_means(_lang_means(chosen), groups)


def fertility_table(scores: Sequence[Score], groups: dict[str, list[str]]) -> Table | None:
    fert = [s for s in scores if s.task == "fertility"]
    if not fert:
        return None
    arm = fert[0].model  # BA and AFA merge the same vocabularies: one arm's numbers suffice
    size = fert[0].size
    fert = [s for s in fert if s.model == arm and s.size == size]
    cell = {(s.lang, s.metric, s.setting): s.value for s in fert}
    rows: list[list[Any]] = []
    for group, langs in groups.items():
        for lang in langs:
            vals = [
                cell.get((lang, f"fertility_{m}", t), math.nan)
                for m in ("tokens_per_word", "tokens_per_byte")
                for t in ("base", "merged")
            ]
            rows.append([lang, group, *vals])
    return Table(
        name="fertility",
        title="Tokenizer fertility before and after the merge",
        columns=[
            "Language",
            "Group",
            "tokens/word base",
            "tokens/word merged",
            "tokens/byte base",
            "tokens/byte merged",
        ],
        rows=rows,
        caption="Fertility on test verses; lower means cheaper encoding.",
    )


def vocab_table(scores: Sequence[Score]) -> Table | None:
    v = {s.setting: s.value for s in scores if s.metric == "vocab_size"}
    if not v:
        return None
    return Table(
        name="vocabulary",
        title="Vocabulary sizes",
        columns=["base |V|", "adapting |V^L|", "merged |V_merged|"],
        rows=[[int(v.get("base", 0)), int(v.get("new", 0)), int(v.get("merged", 0))]],
        caption="Paper 000: 32,000 + 16,000 = 48,000 (appendix A).",
    )


def claims(scores: Sequence[Score], groups: dict[str, list[str]], headline: str) -> list[str]:
    """The paper's four claims, each checked against this run's numbers (no tuning)."""
    out = []
    lm = {a: arm_groups(scores, headline, a, groups) for a in ARMS}
    o = {a: lm[a]["overall"] for a in ARMS}
    out.append(
        _verdict(
            o["AFA"] < o["Baseline"] and o["AFA"] < o["BA"],
            f"AFA lower {headline} than Baseline and BA (overall: Baseline {o['Baseline']:.3f}, "
            f"BA {o['BA']:.3f}, AFA {o['AFA']:.3f})",
        )
    )
    ot = {a: lm[a]["other"] for a in ARMS}
    out.append(
        _verdict(
            ot["BA"] > ot["Baseline"],
            f"BA worse than Baseline on the 'other' languages ({headline}: Baseline "
            f"{ot['Baseline']:.3f}, BA {ot['BA']:.3f})",
        )
    )
    ss = {a: arm_groups(scores, "self_similarity_adjusted", a, groups)["overall"] for a in ARMS}
    out.append(
        _verdict(
            ss["AFA"] < min(ss["BA"], ss["Baseline"]),
            f"AFA lower self-similarity than Baseline and BA (overall adjusted: Baseline {ss['Baseline']:.3f}, "
            f"BA {ss['BA']:.3f}, AFA {ss['AFA']:.3f})",
        )
    )
    wins, total = 0, 0
    for metric in ("bleu", "chrf", "accuracy", "macro_f1"):
        vals = {a: arm_groups(scores, metric, a, groups)["overall"] for a in ARMS}
        if any(math.isnan(v) for v in vals.values()):
            continue
        total += 1
        wins += vals["AFA"] > max(vals["Baseline"], vals["BA"])
    out.append(
        _verdict(
            2 * wins > total,
            f"AFA ahead on most tasks: best on {wins} of {total} "
            "downstream metrics (BLEU, chrF, genre accuracy, macro-F1; overall mean)",
        )
    )
    return out


def _verdict(ok: bool, text: str) -> str:
    return f"**{'holds' if ok else 'does not hold'}**: {text}"


def figure3(
    report: Report, run_dir: Path, scores: Sequence[Score], groups: dict[str, list[str]]
) -> None:
    """Average downstream score (mean of genre accuracy and chrF/100, overall) against parameters."""

    sizes = sorted({s.size for s in scores if s.size}, key=lambda z: _params(scores, z))
    if len(sizes) < 2:
        return
    series = {}
    for arm in ARMS:
        xs, ys = [], []
        for z in sizes:
            acc = arm_groups(scores, "accuracy", arm, groups, z)["overall"]
            ch = arm_groups(scores, "chrf", arm, groups, z)["overall"] / 100
            xs.append(float(_params(scores, z, arm)))
            ys.append((acc + ch) / 2)
        series[arm] = (xs, ys)
    rel = "plots/figure3_scale.png"
    line_plot(
        series,
        run_dir / rel,
        xlabel="parameters",
        ylabel="average score",
        logx=True,
        title="Figure 3: average score vs parameter count",
    )
    report.image(
        rel,
        "Average of overall genre accuracy and chrF/100 per arm and size "
        "(x: parameter count of the instruction-tuned model).",
    )


def _params(scores: Sequence[Score], size: str, arm: str | None = None) -> int:
    for s in scores:
        if (
            s.size == size
            and s.params
            and (arm is None or s.model == arm)
            and s.task in ("genre", "translation")
        ):
            return s.params
    return 0


def write_report(cfg: Any, run_dir: Path) -> Path:
    scores = read_scores(run_dir / "results" / "scores.jsonl")
    groups = cfg.groups.as_dict()
    results = run_dir / "results"
    rep = Report(
        f"{cfg.name}: active forgetting, vocabulary expansion, English-only SFT (paper 000)"
    )
    sizes = ", ".join(cfg.sizes) if cfg.sizes else str(cfg.model.preset or cfg.model.name_or_path)
    rep.paragraph(
        f"Arms: Baseline (pretrained), BA (baseline adapted), AFA (pretrained with active forgetting, "
        f"reset every {cfg.forgetting.reset_every} of {cfg.pretrain.steps} steps, then adapted); all "
        f"instruction-tuned on English only ({cfg.instruct.source} data). Model size(s): {sizes}. "
        f"{len(cfg.groups.all())} languages from the '{cfg.data.source}' source, grouped as paper 000 "
        "Table 6. Tables 1-2 evaluate the models before instruction tuning (Baseline = base model), "
        f"Tables 3-4 the instruction-tuned ones. Headline LM metric: {cfg.evaluate.headline} "
        "(the vocabularies differ, so token perplexity is not comparable across arms)."
    )
    rep.heading("The paper's claims at this scale", 2).bullets(
        claims(scores, groups, cfg.evaluate.headline)
    )
    rep.heading("Results", 2)
    lm_tables(
        rep,
        run_dir,
        [s for s in scores if s.task == "lm"],
        groups,
        cfg.evaluate.headline,
        model_order=ARMS,
    )
    for metric, title, lower in TABLES:
        if any(s.metric == metric for s in scores):
            t = group_table(
                scores,
                metric,
                groups,
                model_order=ARMS,
                name=metric,
                title=title,
                caption="mu_overall averages all evaluated languages.",
                higher_is_better=not lower,
            )
            write_table(results, t)
            rep.heading(title, 3).table(t)
    for extra in (vocab_table(scores), fertility_table(scores, groups)):
        if extra is not None:
            write_table(results, extra)
            rep.heading(extra.title, 3).table(extra)
    rep.heading("Figures", 2)
    figure3(rep, run_dir, scores, groups)
    training_curves(rep, run_dir)
    md, _ = rep.write(run_dir)
    return md

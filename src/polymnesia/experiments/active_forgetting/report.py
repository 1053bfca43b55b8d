"""The report of the ``active_forgetting`` protocol: Aggarwal et al. 2024's tables with intervals,
the claims
with three verdicts (:mod:`.claims`), the zero-shot baselines, the harness scores, Figure 3."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polymnesia.experiments.active_forgetting.claims import (
    floor_claims,
    floor_table,
    genre_learned,
    learned_table,
    paper_claims,
    translated,
)
from polymnesia.experiments.base import banner_of
from polymnesia.experiments.papers import cite
from polymnesia.experiments.reporting import (
    describe_language,
    lm_bar_plot,
    lm_tables,
    missing_arms_aside,
    training_curves,
)
from polymnesia.experiments.seed_records import seeded_run
from polymnesia.experiments.seeds import seed_list, variance_note, with_seed_band
from polymnesia.items import group_intervals
from polymnesia.metrics.base import metric_title
from polymnesia.reports.claims import correct
from polymnesia.reports.claims_table import claims_table
from polymnesia.reports.curves import line_plot
from polymnesia.reports.frame import RunTable, load_run
from polymnesia.reports.render import Report
from polymnesia.reports.tables import (
    Estimate,
    Table,
    group_means,
    group_table,
    language_table,
    write_table,
)
from polymnesia.results import Score, filter_scores, mean

Groups = dict[str, list[str]]

ARMS = ["Baseline", "BA", "AFA"]

#: (metric, paper table, what it scores: ``{}`` the metric's registered title) of the tables
#: after Table 1; the direction is the metric's registration
TABLES = [
    ("self_similarity_adjusted", "Table 2", "{}"),
    ("intra_sentence_similarity_adjusted", "Table 2b", "{}"),
    ("first_pc_variance_explained_adjusted", "Table 2c", "{}"),
    ("bleu", "Table 3", "English-to-X translation, {}"),
    ("chrf", "Table 3b", "English-to-X translation, {}"),
    ("accuracy", "Table 4", "Zero-shot genre classification {} (English-only SFT)"),
    ("macro_f1", "Table 4b", "Zero-shot genre classification {}"),
]
#: (metric, what it scores) of the per-language tables
PER_LANGUAGE = [
    ("chrf", "English-to-X {} per language"),
    ("accuracy", "Zero-shot genre {} per language"),
]


def table_title(metric: str, what: str, number: str | None = None) -> str:
    """``what`` with the metric's registered title in it, capitalised as a title's start."""
    text = what.format(metric_title(metric, start=what.startswith("{}")))
    return f"{number}: {text}" if number else text


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
        caption=f"{cite('000')}: 32,000 + 16,000 = 48,000 (appendix A).",
    )


def figure3(
    report: Report, run_dir: Path, scores: Sequence[Score], groups: dict[str, list[str]]
) -> None:
    """Average downstream score (mean of genre accuracy and chrF/100, overall) against
    parameters.
    """

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


def _captions(cfg: Any, scores: Sequence[Score]) -> dict[str, str]:
    """What each downstream table's numbers mean: BLEU's scale and tokenizer, pooling, scoring."""
    d = cfg.downstream
    sig = sorted({str(s.extra.get("bleu_signature")) for s in scores if s.metric == "bleu"})
    by_lang = ", ".join(f"{k}: {v}" for k, v in d.bleu_tokenize_by_lang.items())
    bleu = (
        f"sacrebleu BLEU on the 0-100 scale ({cite('000')}, Table 3, prints 0-1: divide by 100), "
        f"tokenizer {d.bleu_tokenize}{f' ({by_lang})' if by_lang else ''}; "
        f"signature{'s' if len(sig) > 1 else ''}: {'; '.join(sig) or 'N/A'}."
    )
    pooling = (
        "One last-layer vector per word occurrence, its sub-tokens pooled by "
        f"'{d.isotropy_pooling}'; words seen in at least two verses; minus the cosine of random "
        "word pairs from different verses."
    )
    scoring = (
        f"Each genre name scored as the reply by '{d.zero_shot_scoring}' scoring "
        "(raw likelihood, length_normalised, pmi or contextual calibration); 9 genres."
    )
    return {
        "bleu": bleu,
        "chrf": "sacrebleu chrF (0-100), character n-grams up to 6, beta 2; tokenizer-free.",
        "self_similarity_adjusted": pooling,
        "intra_sentence_similarity_adjusted": pooling,
        "first_pc_variance_explained_adjusted": pooling.replace(
            "minus the cosine of random word pairs from different verses", "minus the MEV baseline"
        ),
        "accuracy": scoring,
        "macro_f1": scoring,
    }


def _item_task(metric: str) -> str:
    return {
        "bleu": "translation",
        "chrf": "translation",
        "accuracy": "genre",
        "macro_f1": "genre",
    }.get(metric, "isotropy")


def downstream_tables(
    rep: Report,
    results: Path,
    cfg: Any,
    run: RunTable,
    groups: Groups,
) -> None:
    """Tables 2-4 by language group, with stratified bootstrap intervals over test items."""
    scores = run.scores()
    captions = _captions(cfg, scores)
    for metric, number, what in TABLES:
        if not run.scores(metric=metric):
            continue
        title = table_title(metric, what, number)
        # isotropy items hold self-similarity only (per word); the other two get no interval
        sets = [
            s
            for s in run.items(task=_item_task(metric))
            if s.kind != "values" or s.extra.get("metric") == metric
        ]
        ivs = group_intervals(sets, metric, groups, cfg.downstream.bootstrap) if sets else None
        t = group_table(
            scores,
            metric,
            groups,
            model_order=ARMS,
            name=metric,
            title=title,
            caption=f"{captions.get(metric, '')} mu_overall averages all evaluated languages.",
            intervals=ivs,
        )
        write_table(results, t)
        rep.heading(title, 3).table(t)


def write_report(cfg: Any, run_dir: Path) -> Path:
    run = seeded_run(load_run(run_dir), seed_list(cfg))  # every record of the run, read once
    scores, items = run.scores(), run.items()
    groups = cfg.groups.as_dict()
    results = run_dir / "results"
    rep = Report(
        f"{cfg.name}: active forgetting, vocabulary expansion, English-only SFT ({cite('000')})",
        banner=banner_of(cfg, run_dir),
    )
    sizes = ", ".join(cfg.sizes) if cfg.sizes else cfg.model.describe()
    rep.paragraph(
        "Arms: Baseline (pretrained), BA (baseline adapted), AFA (pretrained with active "
        "forgetting, "
        f"reset every {cfg.forgetting.reset_every} of {cfg.pretrain.steps} steps, then adapted; "
        "LM head "
        f"'{cfg.adapt.head}' at adaptation); all instruction-tuned on English only "
        f"({cfg.instruct.source} data). Model size(s): {sizes}. "
        f"{len(cfg.groups.all())} languages from the '{cfg.data.source}' source, grouped as "
        f"{cite('000')}, Table 6. Tables 1-2 evaluate the models before instruction tuning "
        "(Baseline = base model), "
        f"Tables 3-4 the instruction-tuned ones. Headline LM metric: {cfg.evaluate.headline} "
        "(the vocabularies differ, so token perplexity is not comparable across arms). "
        f"Intervals: {round(100 * cfg.downstream.bootstrap.level)}% percentile bootstrap over test "
        f"items ({cfg.downstream.bootstrap.n_resamples} resamples), group means resampled within "
        "each language; claims use the paired bootstrap over the items both arms were scored on. "
        + variance_note(cfg)
    )
    boot = cfg.downstream.bootstrap
    size_labels = [s for s in dict.fromkeys(s.size for s in run.scores(task="lm"))]
    found = []
    floors = {}  # size -> arm -> its chrF against the floor of unrelated references
    for size in size_labels:
        one = size if len(size_labels) > 1 else None
        floors[size] = floor_claims(items, ARMS, boot, one)
        ok = {
            "genre": genre_learned(scores, items, ARMS, boot, one),
            "translation": translated(floors[size]),
        }
        found += paper_claims(scores, items, groups, cfg.evaluate.headline, boot, one, ok)
    found = missing_arms_aside(correct(with_seed_band(found, cfg)), run_dir)
    rep.claims(found)
    write_table(results, claims_table(found))
    rep.heading("Did the models learn the tasks?", 2)
    for size in size_labels:
        one = size if len(size_labels) > 1 else None
        for t in (
            learned_table(scores, items, groups, ARMS, boot, one),
            floor_table(list(floors[size].values())) if floors[size] else None,
        ):
            if t is not None:
                if one is not None:
                    t.name, t.title = f"{t.name}_{size}", f"{t.title} ({size})"
                write_table(results, t)
                rep.table(t)
    rep.heading("Results", 2)
    lm_tables(
        rep,
        run_dir,
        run.scores(task="lm"),
        groups,
        cfg.evaluate.headline,
        model_order=ARMS,
        items=run.items(task="lm"),
        bootstrap=boot,
    )
    downstream_tables(rep, results, cfg, run, groups)
    per_language_tables(rep, results, run, groups)
    harness_table(rep, results, scores, cfg)
    for extra in (vocab_table(scores), fertility_table(scores, groups)):
        if extra is not None:
            write_table(results, extra)
            rep.heading(extra.title, 3).table(extra)
    rep.heading("Figures", 2)
    lm_bar_plot(rep, run_dir, run.scores(task="lm"), groups, cfg.evaluate.headline, ARMS)
    figure3(rep, run_dir, scores, groups)
    training_curves(rep, run_dir)
    md, _ = rep.write(run_dir)
    return md


def per_language_tables(rep: Report, results: Path, run: RunTable, groups: Groups) -> None:
    """chrF and genre accuracy per language and arm, with their bootstrap intervals."""
    for metric, what in PER_LANGUAGE:
        chosen = run.scores(metric=metric)
        if chosen:
            title = table_title(metric, what)
            t = language_table(
                chosen,
                metric,
                groups,
                model_order=ARMS,
                describe=describe_language,
                name=f"{metric}_by_language",
                title=title,
            )
            write_table(results, t)
            rep.heading(title, 3).table(t)


def harness_table(rep: Report, results: Path, scores: Sequence[Score], cfg: Any) -> None:
    """lm-evaluation-harness scores of the instruction-tuned models (``evaluate.harness``),
    ± 1.96 stderr."""
    if cfg.evaluate.harness is None:
        return
    chosen = [s for s in scores if "lm_eval_version" in s.extra]
    if not chosen:
        return
    keys = list(dict.fromkeys((s.task, s.lang, s.metric, s.size) for s in chosen))
    cell = {(s.model, s.task, s.metric, s.size): s for s in chosen}
    rows: list[list[Any]] = []
    for task, lang, metric, size in keys:
        row: list[Any] = [task, lang, metric]
        for arm in ARMS:
            s = cell.get((arm, task, metric, size))
            row.append(_stderr_cell(s) if s is not None else math.nan)
        rows.append(row)
    h = cfg.evaluate.harness
    shots = "the task's default" if h.num_fewshot is None else str(h.num_fewshot)
    t = Table(
        name="harness",
        title="lm-evaluation-harness tasks (instruction-tuned models)",
        columns=["Task", "Language", "Metric", *ARMS],
        rows=rows,
        caption=f"lm-eval tasks {', '.join(h.tasks)}; few-shot: {shots}; limit: {h.limit}; "
        "± is 1.96 x lm-eval's standard error (N/A where lm-eval gives none).",
    )
    write_table(results, t)
    rep.heading(t.title, 3).table(t)


def _stderr_cell(s: Score) -> Estimate:
    se = s.stderr if s.stderr is not None and math.isfinite(s.stderr) else math.nan
    n = s.extra.get("n_samples")
    return Estimate(
        s.value, s.value - 1.96 * se, s.value + 1.96 * se, n if isinstance(n, int) else None
    )

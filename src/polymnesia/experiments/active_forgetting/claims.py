"""Aggarwal et al. 2024's claims as three-verdict claims, and whether the zero-shot models learned
the task.

Each finding of the paper becomes the expected sign of a difference between
two arms, measured on this run with a paired test
(:func:`polymnesia.reports.evidence.arm_difference`: the paired bootstrap over
the test items both arms were scored on, within each language, Koehn 2004;
the paired t-test over seeds where a run has several). The verdict
(:mod:`polymnesia.reports.claims`) is *holds* when the effect has the paper's
sign and its interval excludes zero, *contradicted* for the opposite sign
with an interval excluding zero, and *inconclusive* otherwise.

Aggarwal et al. 2024:

1. AFA has lower perplexity than Baseline and BA (Table 1; here bits per
   byte, comparable across vocabularies): two claims, AFA - Baseline < 0 and
   AFA - BA < 0, over every evaluated language.
2. Vocabulary expansion hurts the languages it did not add (Table 1, BA vs
   Baseline on "other"): BA - Baseline > 0 on the other group.
3. AFA's representations are more isotropic (Table 2, lower
   self-similarity): AFA - Baseline < 0 and AFA - BA < 0, paired over the
   words both arms scored.
4. AFA is ahead downstream (Table 3 and the downstream tasks): AFA - BA > 0
   and AFA - Baseline > 0 on chrF (translation) and on zero-shot genre
   accuracy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from polymnesia.errors import DataError
from polymnesia.items import BootstrapConfig, ItemSet, across_seeds, select_items
from polymnesia.metrics.hierarchical import paired_hierarchical_bootstrap
from polymnesia.metrics.translation import chrf_from_stats
from polymnesia.metrics.uncertainty import paired_bootstrap, sum_statistic
from polymnesia.reports.baselines import Baselines, baseline_table, learned_arms_of
from polymnesia.reports.claims import Claim, claim_from_test, rests_on, slug
from polymnesia.reports.claims_table import claims_block_table
from polymnesia.reports.evidence import arm_difference, arm_score, item_baselines
from polymnesia.reports.table_core import Table
from polymnesia.results import Score

SOURCE = "Aggarwal et al. 2024"
#: (metric, task of its items, words for the statement, table in the paper)
DOWNSTREAM = (
    ("chrf", "translation", "chrF", "Table 3"),
    ("accuracy", "genre", "genre accuracy", "Tables 7-11 (downstream; genre stands in)"),
)
#: why a downstream claim is not testable, per task: its arm fell short of what the task needs
SHORT_OF = {
    "genre": "did not learn",
    "translation": "did not translate (chrF not above the floor of unrelated references)",
}


def _diff(
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    metric: str,
    task: str,
    a: str,
    b: str,
    cfg: BootstrapConfig,
    **where: Any,
) -> Any:
    chosen = [s for s in scores if s.task == task]
    return arm_difference(chosen, select_items(items, task=task), metric, a, b, cfg=cfg, **where)


def paper_claims(
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    groups: dict[str, list[str]],
    headline: str,
    cfg: BootstrapConfig,
    size: str | None = None,
    ok: Mapping[str, Mapping[str, bool]] | None = None,
) -> list[Claim]:
    """The claims of Aggarwal et al. 2024 on this run's scores and items (one model size, ``size``).
    ``ok`` (task -> arm -> learned?) sets a downstream claim aside as not testable when an arm
    it compares did not learn the task: ``genre`` from :func:`genre_learned`, ``translation``
    from :func:`translated` (chrF above the floor of unrelated references)."""
    at = {} if size is None else {"size": size}
    tag = f" ({size})" if size is not None else ""
    out: list[Claim] = []

    def add(
        cid: str,
        statement: str,
        sign: int,
        metric: str,
        task: str,
        a: str,
        b: str,
        src: str,
        **w: Any,
    ) -> None:
        if not any(s.metric == metric and s.task == task and s.model in (a, b) for s in scores):
            return
        test = _diff(scores, items, metric, task, a, b, cfg, **at, **w)
        c = claim_from_test(
            statement + tag,
            sign,
            test,
            effect_label=f"{metric}: {a} − {b}",
            source=f"{SOURCE}, {src}",
            id=f"af.{cid}" + (f".{slug(size)}" if size is not None else ""),
        )
        why = SHORT_OF.get(task)
        out.append(rests_on(c, [a, b], (ok or {}).get(task, {}), why) if why else c)

    for other in ("Baseline", "BA"):
        add(
            f"lm.afa_lt_{slug(other)}",
            f"AFA has lower {headline} than {other} (all languages)",
            -1,
            headline,
            "lm",
            "AFA",
            other,
            "Table 1",
        )
    if groups.get("other"):
        add(
            "lm.ba_gt_baseline_other",
            f"BA has higher {headline} than Baseline on the 'other' languages (vocabulary "
            "expansion hurts languages it did not add)",
            +1,
            headline,
            "lm",
            "BA",
            "Baseline",
            "Table 1",
            lang=groups["other"],
        )
    for other in ("Baseline", "BA"):
        add(
            f"isotropy.afa_lt_{slug(other)}",
            f"AFA has lower self-similarity (more isotropic) than {other}",
            -1,
            "self_similarity_adjusted",
            "isotropy",
            "AFA",
            other,
            "Table 2",
        )
    for metric, task, words, src in DOWNSTREAM:
        for other in ("BA", "Baseline"):
            add(
                f"{slug(metric)}.afa_gt_{slug(other)}",
                f"AFA has higher {words} than {other}",
                +1,
                metric,
                task,
                "AFA",
                other,
                src,
            )
    return out


def learned_table(
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    groups: dict[str, list[str]],
    arms: Sequence[str],
    cfg: BootstrapConfig,
    size: str | None = None,
) -> Table | None:
    """Zero-shot genre accuracy and macro-F1 of each arm against chance and majority-class
    baselines.

    Scopes: English (the instruction-tuning language, where the task was
    learned) and all languages (the groups are in Table 4); the score's
    interval is a stratified bootstrap over the scope's verses, the baselines
    those of the pooled gold genres of the same verses.
    """
    rows = learned_rows(scores, items, arms, cfg, size)
    if not rows:
        return None
    return baseline_table(
        rows,
        name="genre_baselines",
        title="Did the task models learn? Zero-shot genre classification against chance and "
        "majority",
    )


def genre_learned(
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    arms: Sequence[str],
    cfg: BootstrapConfig,
    size: str | None = None,
) -> dict[str, bool]:
    """``{arm: learned?}``: zero-shot genre accuracy over all languages at the learned floor
    (:func:`~polymnesia.reports.baselines.learned_floor`); the genre claims rest on it."""
    rows = [r for r in learned_rows(scores, items, arms, cfg, size) if r[2] == "accuracy"]
    return learned_arms_of(rows, scope="all")


def learned_rows(
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    arms: Sequence[str],
    cfg: BootstrapConfig,
    size: str | None = None,
) -> list[tuple[str, str, str, Any, Baselines]]:
    """The rows of :func:`learned_table`: ``(arm, scope, metric, interval, baselines)``."""
    at: dict[str, Any] = {} if size is None else {"size": size}
    genre = select_items(items, task="genre", **at)
    if not genre:
        return []
    chosen = [s for s in scores if s.task == "genre"]
    scopes = [("en", ["en"])] if any(s.lang == "en" for s in genre) else []
    scopes.append(("all", sorted({s.lang for s in genre})))
    rows: list[tuple[str, str, str, Any, Baselines]] = []
    for arm in arms:
        for scope, langs in scopes:
            mine = select_items(genre, model=arm, lang=langs)
            if not mine:
                continue
            base = item_baselines(mine)
            for metric in ("accuracy", "macro_f1"):
                try:
                    iv = arm_score(chosen, genre, metric, arm, cfg=cfg, lang=langs, **at)
                except DataError:
                    continue
                rows.append((arm, scope, metric, iv, base))
    return rows


def translated(floors: Mapping[str, Claim]) -> dict[str, bool]:
    """``{arm: translates?}`` from :func:`floor_claims`: its chrF is above the floor of
    unrelated references (the floor claim holds); the chrF claims rest on it."""
    return {arm: c.verdict == "holds" for arm, c in floors.items()}


def floor_claims(
    items: Sequence[ItemSet], arms: Sequence[str], cfg: BootstrapConfig, size: str | None = None
) -> dict[str, Claim]:
    """Per arm with translation items: chrF against the true references minus chrF against
    unrelated ones (> 0: it translates).

    The floor is the same outputs scored against the reference of another
    verse (``floor_stats`` of the translation items), so the difference is
    paired verse by verse (stratified by language) and isolates what depends on
    the source sentence from fluent but unrelated target-language text.
    """
    at: dict[str, Any] = {} if size is None else {"size": size}
    out: dict[str, Claim] = {}
    for arm in arms:
        sets = [
            s
            for s in select_items(items, task="translation", model=arm, **at)
            if "floor_stats" in s.columns
        ]
        if not sets:
            continue
        by_seed: dict[int | None, list[tuple[ItemSet, ...]]] = {}
        for s in sets:  # a pooled run's sets carry their training seed
            by_seed.setdefault(s.seed, []).append((s,))
        strata, shared = across_seeds(list(by_seed.values()))
        real = [[_chrf(t[0], "stats") for t in seed] for seed in strata]
        floor = [[_chrf(t[0], "floor_stats") for t in seed] for seed in strata]
        n, level, seed = cfg.n_resamples, cfg.level, cfg.seed
        test = (
            paired_bootstrap(real[0], floor[0], n_resamples=n, level=level, seed=seed)
            if len(strata) == 1
            else paired_hierarchical_bootstrap(
                real, floor, n_resamples=n, level=level, seed=seed, shared_items=shared
            )
        )
        n_langs = len(strata[0])
        out[arm] = claim_from_test(
            f"{arm} translates: chrF above the floor of unrelated references ({n_langs} "
            f"language{'s' if n_langs != 1 else ''})",
            +1,
            test,
            effect_label="chrF − floor",
            id=f"af.floor.{slug(arm)}" + (f".{slug(size)}" if size is not None else ""),
            kind="precondition",
        )
    return out


def _chrf(s: ItemSet, column: str) -> Any:
    return sum_statistic(np.asarray(s.columns[column]), chrf_from_stats, "chrf")


def floor_table(claims: Sequence[Claim]) -> Table:
    """The translation-floor checks as a table (``translation_floor.csv``)."""
    t = claims_block_table(claims, "Check")
    t.name = "translation_floor"
    t.title = "Did the models translate? chrF against the floor of unrelated references"
    t.caption = (
        "Floor: each output scored against the reference of another verse of the same language; "
        "the difference is paired over verses (bootstrap within each language)."
    )
    return t

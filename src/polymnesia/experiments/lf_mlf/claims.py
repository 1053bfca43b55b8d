"""Mao et al. 2022's claims judged with uncertainty, and the did-the-models-learn baselines.

Each claim is the sign of a paired difference between two arms
(:func:`polymnesia.reports.evidence.arm_difference`: with two or more shared
seeds the paired test over seeds and test items (item bootstrap plus seed variance), or the paired
t-test over seeds where items are missing; with one seed the paired bootstrap
over test items, each language resampled within itself), judged holds /
contradicted / inconclusive (:mod:`polymnesia.reports.claims`). Only what the
paper states is claimed:

* zero-shot (Tables 1-3): LF-MLF above each other multi-lingual method and
  above each single-language fine-tuning (SLF) arm, per task;
* forgetting (Section 3, the method's aim; the paper bounds it but never
  measures it): LF-MLF's held-out pre-training loss (causal-LM loss of a
  decoder, masked-LM loss of an encoder) below each other multi-lingual
  method's (F_p differs from that loss by the base model's loss, the same
  for both arms);
* the sweep (Figure 3): LF-MLF above Uniform-MLF zero-shot at each number of
  sources. Figure 4's finding (R_T of LF-MLF and Uniform-MLF "similar", not
  evidently above SLF) is a statement of no difference and is shown, not judged;
* the branches (Figure 5a vs 6a): LF-MLF above Uniform-MLF zero-shot from each branch;
* fine-tuning performance (Tables 4-6, Section 5.2.2: "comparable to the baselines"): a
  non-inferiority claim per other method on the source languages, LF-MLF no lower than it by
  more than ``fine_tuning_margin`` (default 0.01: the paper's largest deficit of
  LF-MLF against a baseline in Tables 4-6 is 0.77 F1 points, TyDiQA ru).

A zero-shot claim between two arms that both sit at the trivial score of the target
languages (:func:`transfer_checks`: the majority-class share of a label task, the trivial
answer of a tagging or QA task) is not testable: a difference between two models that did
not transfer says nothing about transfer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from polymnesia.errors import DataError
from polymnesia.experiments.lf_mlf.baselines import (
    baseline_rows,
    has_scores,
    headroom_of,
    trivial_score,
)
from polymnesia.experiments.lf_mlf.config import REFERENCE, LFMLFConfig, TaskSection, label_of
from polymnesia.items import ItemSet
from polymnesia.reports.baselines import learned_arms_of
from polymnesia.reports.claims import (
    Claim,
    claim_from_interval,
    claim_from_test,
    not_testable,
    rests_on,
    slug,
)
from polymnesia.reports.evidence import arm_difference, arm_score
from polymnesia.reports.verdicts import Kind
from polymnesia.results import Score

SOURCE = "Mao et al. 2022"
#: methods Mao et al. 2022 does not run: LF-MLF against them is an extension, judged apart
NOT_IN_PAPER = ("MGDA",)


def _claim(
    statement: str,
    sign: int,
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    metric: str,
    a: str,
    b: str,
    source: str,
    label: str,
    cid: str,
    kind: Kind = "paper",
    **where: Any,
) -> Claim | None:
    if not (
        has_scores(scores, a, metric=metric, **where)
        and has_scores(scores, b, metric=metric, **where)
    ):
        return None
    try:
        test = arm_difference(scores, items, metric, a, b, **where)
    except DataError:
        return None
    return claim_from_test(
        statement, sign, test, effect_label=label, source=source, id=cid, kind=kind
    )


#: the paper's LF-MLF minus each arm, zero-shot, on a 0-1 scale: the range over NER, TyDiQA
#: and XNLI (Tables 1-3; an SLF arm over the tasks that fine-tune on its language)
PAPER_ZERO_SHOT = {
    "Uniform-MLF": "+0.004 to +0.011 (Tables 1-3)",
    "PCGrad": "+0.007 to +0.013 (Tables 1-3)",
    "GradVac": "+0.009 to +0.017 (Tables 1-3)",
    "SLF-en": "+0.031 to +0.085 (Tables 1-3)",
    "SLF-de": "+0.013 to +0.100 (Tables 1, 3)",
    "SLF-fr": "+0.016 to +0.045 (Tables 1, 3)",
    "SLF-ru": "+0.024 (Table 2)",
}
#: the same for fine-tuning performance, per source language (Tables 4-6)
PAPER_FINE_TUNING = {
    "Uniform-MLF": "-0.008 to +0.010 per language (Tables 4-6)",
    "PCGrad": "-0.001 to +0.018 per language (Tables 4-6)",
    "GradVac": "-0.006 to +0.021 per language (Tables 4-6)",
    "SLF-en": "+0.002 to +0.033 (Tables 4-6)",
    "SLF-de": "+0.001 to +0.010 (Tables 4, 6)",
    "SLF-fr": "-0.006 to +0.010 (Tables 4, 6)",
    "SLF-ru": "+0.008 (Table 5)",
}
#: why a zero-shot claim between two arms that did not transfer is not testable
NO_TRANSFER = "did not transfer (target score not above the trivial score of the targets)"


def _main_arms(cfg: LFMLFConfig, task: TaskSection) -> list[str]:
    """The arms of the main setting: every method, then the SLF arm of each source."""
    arms = [label_of(m) for m in cfg.methods]
    return arms + ([f"SLF-{s}" for s in cfg.sources_of(task)] if cfg.slf else [])


def transfer_checks(
    cfg: LFMLFConfig, task: TaskSection, scores: Sequence[Score], items: Sequence[ItemSet]
) -> dict[str, Claim]:
    """Per main arm: its zero-shot score on the targets minus what a model that learned
    nothing scores there (:func:`trivial_score`), a precondition that holds when the interval
    lies above 0 (the arm transfers). The zero-shot claims rest on it."""
    metric, out = task.metric, {}
    where: dict[str, Any] = {"group": "target", "setting": "main", "task": task.name}
    for arm in _main_arms(cfg, task):
        if not has_scores(scores, arm, metric=metric, **where):
            continue
        trivial = trivial_score(task, metric, arm, scores, items, **where)
        if trivial is None:
            continue
        floor, what = trivial
        try:
            iv = arm_score(scores, items, metric, arm, **where)
        except DataError:
            continue
        if not math.isfinite(iv.estimate):
            continue
        out[arm] = claim_from_interval(
            f"{task.name}: {arm} transfers: zero-shot {metric} above {what} of the targets",
            +1,
            iv,
            reference=floor,
            effect_label=f"{metric} − trivial",
            id=f"lfmlf.{slug(task.name)}.transfers.{slug(arm)}",
            kind="precondition",
        )
    return out


def transfers(checks: Mapping[str, Claim]) -> dict[str, bool]:
    """``{arm: transfers?}`` from :func:`transfer_checks` (the check holds)."""
    return {arm: c.verdict == "holds" for arm, c in checks.items()}


def _against(
    statement: str,
    other: str,
    tables: str,
    part: str,
    section: TaskSection,
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    **where: Any,
) -> Claim | None:
    """LF-MLF above ``other`` on the task's metric: a paper claim, or an extension against a
    method the paper does not run (:data:`NOT_IN_PAPER`)."""
    extra = other in NOT_IN_PAPER
    return _claim(
        statement,
        +1,
        scores,
        items,
        section.metric,
        REFERENCE,
        other,
        f"{SOURCE}, {tables}" + (" (no MGDA there)" if extra else ""),
        f"{section.metric}(LF-MLF) − {section.metric}({other})",
        f"lfmlf.{slug(section.name)}.{part}.{slug(other)}",
        "extension" if extra else "paper",
        **where,
    )


def zero_shot_claims(
    cfg: LFMLFConfig,
    task: TaskSection,
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    ok: Mapping[str, bool] | None = None,
    moved: Mapping[str, bool] | None = None,
) -> list[Claim]:
    """LF-MLF above each other main arm zero-shot. ``ok``: arm -> learned its sources (a claim
    on an arm that did not is not testable); ``moved``: arm -> transfers (a claim between two
    arms that both do not is not testable, :data:`NO_TRANSFER`)."""
    metric, out = task.metric, []
    where: dict[str, Any] = {"group": "target", "setting": "main", "task": task.name}
    others = [a for a in _main_arms(cfg, task) if a != REFERENCE]
    for other in others:
        c = _against(
            f"{task.name}: LF-MLF has better zero-shot {metric} than {other}",
            other,
            "Tables 1-3",
            "zero_shot_gt",
            task,
            scores,
            items,
            **where,
        )
        if not c:
            continue
        c = replace(
            c,
            paper=PAPER_ZERO_SHOT.get(other, ""),
            headroom=headroom_of(task, metric, scores, items, where),
        )
        c = rests_on(c, [REFERENCE, other], ok or {})
        pair = [REFERENCE, other]
        if c.testable and moved is not None and not any(moved.get(a, True) for a in pair):
            c = not_testable(c, pair, NO_TRANSFER)
        out.append(c)
    return out


def fine_tuning_claims(
    cfg: LFMLFConfig,
    task: TaskSection,
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    ok: Mapping[str, bool] | None = None,
) -> list[Claim]:
    """Tables 4-6: LF-MLF's score on the source languages comparable to each other method's
    (non-inferiority at ``fine_tuning_margin``), and to each SLF arm's on that arm's
    own language; not testable where an arm did not learn its sources."""
    metric, out = task.metric, []
    margin = cfg.fine_tuning_margin
    where: dict[str, Any] = {"group": "source", "setting": "main", "task": task.name}
    for other in [a for a in _main_arms(cfg, task) if a != REFERENCE]:
        langs = [other[4:]] if other.startswith("SLF-") else cfg.sources_of(task)
        scope = f"on {langs[0]}" if other.startswith("SLF-") else "on the sources"
        c = _against(
            f"{task.name}: LF-MLF's fine-tuning {metric} {scope} is comparable to {other}'s "
            f"(at most {margin:g} lower)",
            other,
            "Tables 4-6 and Section 5.2.2",
            "fine_tuning_ni",
            task,
            scores,
            items,
            lang=langs,
            **where,
        )
        if c:
            c = replace(
                c,
                margin=margin,
                paper=PAPER_FINE_TUNING.get(other, ""),
                headroom=headroom_of(task, metric, scores, items, {**where, "lang": langs}),
            )
            out.append(rests_on(c, [REFERENCE, other], ok or {}))
    return out


#: the task field of F_p records written before they named the fine-tuned task
OLD_FP_TASK = "lm"
#: the label of the base model's own language-modelling records (L_p(theta_p): no task of its own)
BASE = "base"


def forgetting_by_task(
    cfg: LFMLFConfig, scores: Sequence[Score], items: Sequence[ItemSet]
) -> tuple[list[Score], list[ItemSet]]:
    """F_p records (group ``forgetting``) name the task whose fine-tuned model they measure;
    records of entries cached before they did (task ``lm``) are given the config's task when
    it has one (with several, which task they belong to is unknown and they stay ``lm``). The
    base model's records keep theirs."""
    tasks = cfg.task_list()
    if len(tasks) != 1:
        return list(scores), list(items)
    name = tasks[0].name

    def fix(x: Any) -> Any:
        old = x.group == "forgetting" and x.task == OLD_FP_TASK and x.model != BASE
        return replace(x, task=name) if old else x

    return [fix(s) for s in scores], [fix(s) for s in items]


def forgetting_claims(
    cfg: LFMLFConfig,
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    ok: Mapping[str, Mapping[str, bool]] | None = None,
) -> list[Claim]:
    """LF-MLF's F_p below each other method's, per fine-tuned task (each task's models are
    their own comparison; pooled, one language held an item set per task and no paired
    test could be made)."""
    out = []
    losses = {"lm_loss": "", "mlm_loss": ", masked-LM loss"}  # the base model's pre-training loss
    tasks = sorted({s.task for s in scores if s.group == "forgetting"})
    for task in tasks:
        where: dict[str, Any] = {"group": "forgetting", "setting": "main", "task": task}
        prefix = f"{task}: " if len(tasks) > 1 else ""
        for loss, what in losses.items():
            for other in [label_of(m) for m in cfg.methods if label_of(m) != REFERENCE]:
                c = _claim(
                    f"{prefix}LF-MLF forgets the pretraining objective less than {other} (lower "
                    f"F_p{what})",
                    +1,
                    scores,
                    items,
                    loss,
                    other,
                    REFERENCE,
                    f"{SOURCE}, Section 3 (the aim; not measured in the paper)"
                    + ("; no MGDA there" if other in NOT_IN_PAPER else ""),
                    f"F_p({other}) − F_p(LF-MLF)",
                    f"lfmlf.{slug(task)}.{loss}_lt.{slug(other)}",
                    "extension" if other in NOT_IN_PAPER else "paper",
                    **where,
                )
                if c:
                    out.append(rests_on(c, [REFERENCE, other], (ok or {}).get(task, {})))
    return out


def _above_uniform(
    task: TaskSection,
    scores: Sequence[Score],
    items: Sequence[ItemSet],
    settings: Sequence[tuple[str, str]],
    source: str,
) -> list[Claim]:
    """LF-MLF above Uniform-MLF zero-shot on ``task`` in each ``(setting, statement)``."""
    out, metric = [], task.metric
    for setting, statement in settings:
        c = _claim(
            f"{task.name}: {statement}",
            +1,
            scores,
            items,
            metric,
            REFERENCE,
            "Uniform-MLF",
            f"{SOURCE}, {source}",
            f"{metric}(LF-MLF) − {metric}(Uniform-MLF)",
            f"lfmlf.{slug(task.name)}.{slug(setting)}.zero_shot_gt.uniform_mlf",
            group="target",
            setting=setting,
            task=task.name,
        )
        if c:
            out.append(c)
    return out


def sweep_and_branch_claims(
    cfg: LFMLFConfig, task: TaskSection, scores: Sequence[Score], items: Sequence[ItemSet]
) -> list[Claim]:
    """LF-MLF above Uniform-MLF zero-shot at each number of sources (Figure 3), then from each
    branch (Figures 5a and 6a), for the parts this run has."""
    m, out = task.metric, []
    if cfg.sweep and "sweep" in cfg.parts:
        settings = [
            (
                f"top{k}",
                f"with the top {k} sources, LF-MLF has better zero-shot {m} than Uniform-MLF",
            )
            for k in sorted(cfg.sweep.counts)
        ]
        out += _above_uniform(task, scores, items, settings, "Figure 3")
    if cfg.branches and "branches" in cfg.parts:
        settings = [
            (
                f"branch_{name}",
                f"fine-tuned on {name}, LF-MLF transfers better to the other branches than "
                "Uniform-MLF",
            )
            for name in cfg.branches.groups
        ]
        out += _above_uniform(task, scores, items, settings, "Figures 5a and 6a")
    return out


def all_claims(cfg: LFMLFConfig, scores: Sequence[Score], items: Sequence[ItemSet]) -> list[Claim]:
    """Every claim of the run. A zero-shot or forgetting claim that compares a main arm whose
    score on its own training sources is below the learned floor (twice chance and twice the
    majority class; label tasks only,
    :func:`~polymnesia.experiments.lf_mlf.baselines.baseline_rows`) is not testable: transfer and
    forgetting of a task the model never learned say nothing about the method."""
    out: list[Claim] = []
    ok: dict[str, dict[str, bool]] = {}
    for task in cfg.task_list():
        ok[task.name] = learned_arms_of(baseline_rows(cfg, task, scores, items))
        moved = transfers(transfer_checks(cfg, task, scores, items))
        out += zero_shot_claims(cfg, task, scores, items, ok[task.name], moved)
        out += fine_tuning_claims(cfg, task, scores, items, ok[task.name])
        out += sweep_and_branch_claims(cfg, task, scores, items)
    return out + forgetting_claims(cfg, scores, items, ok)

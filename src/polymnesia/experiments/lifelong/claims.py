"""Khelli et al. 2025's findings as claims with three verdicts, and the task models against chance.

Each claim is the sign the paper reports for an effect measured on this run's
accuracy matrices; the effect's interval comes from the shared bootstrap
replicates of every R entry (:mod:`polymnesia.experiments.lifelong.evidence`),
so a difference between two arms is a paired bootstrap over the same test
items (with several training seeds, over seeds and items: the item variance of the
pooled replicates plus the variance over seeds, with a Student t quantile, from
:class:`~polymnesia.experiments.lifelong.evidence.Pool`). Holds: the paper's
sign and an interval excluding zero; contradicted: the opposite sign, excluding
zero; inconclusive otherwise. A claim that rests on an arm which did not learn the
task (its score right after learning each language below twice chance and twice
the majority-class score, :func:`learned_arms`) is "not testable"; NON-SHARED
LoRA's "forgets less" is not applicable (it cannot forget: one adapter per
language on a frozen base), and its final-score claim is stated as such.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from polymnesia.continual.analysis import group_of, hop_average
from polymnesia.continual.methods import get_method
from polymnesia.continual.resample import Replicates
from polymnesia.experiments.lifelong.evidence import (
    Evidence,
    Pool,
    as_pool,
    best_of,
    mean_baselines,
)
from polymnesia.experiments.lifelong.results import Arm, learned_score, multi_hop
from polymnesia.experiments.papers import cite
from polymnesia.metrics.continual import Kind
from polymnesia.metrics.seed_tests import group_test, smallest_permutation_p
from polymnesia.reports.baselines import baseline_table, learned
from polymnesia.reports.claims import Claim, claim_from_test, not_applicable, rests_on, slug
from polymnesia.reports.table_core import Table
from polymnesia.reports.verdicts import ALPHA
from polymnesia.reports.verdicts import Kind as ClaimKind

SOURCE = cite("004")


def _claim(
    cid: str,
    statement: str,
    sign: int,
    r: Replicates,
    label: str,
    source: str,
    kind: ClaimKind = "paper",
    paper: str = "",
) -> Claim:
    c = claim_from_test(
        statement, sign, r.test(), effect_label=label, source=source, id=f"ll.{cid}", kind=kind
    )
    return replace(c, paper=paper) if paper else c


def with_headroom(claims: Sequence[Claim], headroom: float | None) -> list[Claim]:
    """``claims`` with the room above chance of their scores (``1 - max(chance, majority)``
    of the task languages, :func:`headroom_of`) for each effect's share of it."""
    return [replace(c, headroom=headroom) for c in claims] if headroom else list(claims)


def headroom_of(ev: Evidence | Pool | None, metric: str) -> float | None:
    """``1 - max(chance, majority)`` of the languages' mean baselines (label tasks), else
    None."""
    if ev is None or not ev.baselines or metric not in ("accuracy", "macro_f1"):
        return None
    base = mean_baselines(ev.baselines)
    return 1.0 - max(base.chance(metric), base.majority(metric))


def learned_arms(arms: Sequence[Arm], ev: Evidence | Pool | None, metric: str) -> dict[str, bool]:
    """``{arm label: learned?}``: the arm's score on each language right after learning it
    (R's diagonal, mean over languages, orders and seeds) reaches
    :func:`~polymnesia.reports.baselines.learned_floor`
    of the languages' mean baselines. Empty (no check) for a task without class labels."""
    if ev is None or not ev.baselines or metric not in ("accuracy", "macro_f1"):
        return {}
    base = mean_baselines(ev.baselines)
    pool = as_pool(list(arms), {}, ev)
    return {a.label: learned(pool.point(a, _diagonal), base, metric) for a in arms}


def _diagonal(rs: Mapping[str, np.ndarray], _orders: Mapping[str, list[str]]) -> float:
    return learned_score(rs)


#: why NON-SHARED LoRA's "forgets less" is not tested (docs/lifelong.md)
NONSHARED_CANNOT_FORGET = (
    "one adapter per language on a frozen base: a language's score cannot change after it is "
    "learned (CBT = 0 by construction), so 'forgets less than VANILLA' only restates 'VANILLA "
    "forgets'; its final score is tested in the next claim"
)


def method_claims(
    arms: Sequence[Arm],
    m: Mapping[str, Mapping[str, Replicates]],
    ok: Mapping[str, bool] | None = None,
) -> list[Claim]:
    """Tables 1-2: MULTI best, VANILLA forgets, SHARED LoRA forgets more and transfers less
    forward than VANILLA, NON-SHARED LoRA ends above VANILLA. ``ok`` (:func:`learned_arms`)
    marks the claims resting on an arm that did not learn as not testable."""
    ok = ok or {}
    out: list[Claim] = []
    multi = next((a for a in arms if a.method == "multi" and a.rank is None), None)
    # the paper's methods only: a forgetting baseline (an extension) never changes this claim
    others = [a for a in arms if a is not multi and not get_method(a.method).against_forgetting]
    if multi is not None and others:
        d = m[multi.label]["final"] - best_of([m[a.label]["final"] for a in others])
        out.append(
            rests_on(
                _claim(
                    "multi_best_final",
                    "MULTI has the best final score of the paper's methods",
                    +1,
                    d,
                    "final(MULTI) − best other",
                    f"{SOURCE} Table 1: 75.03% vs at most 74.19%",
                    paper="+0.008 (Table 1)",
                ),
                [multi.label],
                ok,
            )
        )
    vanilla = next((a for a in arms if a.method == "vanilla"), None)
    if vanilla is None:
        return out
    v = m[vanilla.label]
    V = vanilla.label
    out.append(
        rests_on(
            _claim(
                "vanilla_forgets",
                "VANILLA forgets: CBT < 0",
                -1,
                v["cbt"],
                "CBT(VANILLA)",
                f"{SOURCE} Table 2: -0.08",
                paper="-0.08 (Table 2)",
            ),
            [V],
            ok,
        )
    )
    for a in (a for a in arms if a.method == "shared_lora"):
        for key, what, paper, cid, diff in (
            (
                "cbt",
                "forgets more than VANILLA (lower CBT)",
                "-0.12 to -0.14 vs -0.08",
                "cbt",
                "-0.04 to -0.06 (Table 2)",
            ),
            (
                "cft",
                "transfers forward less than VANILLA (lower CFT)",
                "0.51-0.53 vs 0.55",
                "cft",
                "-0.02 to -0.04 (Table 2)",
            ),
        ):
            d = m[a.label][key] - v[key]
            c = _claim(
                f"{slug(a.label)}.{cid}_lt_vanilla",
                f"{a.label} {what}",
                -1,
                d,
                f"{key.upper()}({a.label}) − {key.upper()}(VANILLA)",
                f"{SOURCE} Table 2: {paper}",
                paper=diff,
            )
            out.append(rests_on(c, [a.label, V], ok))
    for a in (a for a in arms if a.method == "nonshared_lora"):
        forgets = _claim(
            f"{slug(a.label)}.cbt_gt_vanilla",
            f"{a.label} forgets less than VANILLA (higher CBT)",
            +1,
            m[a.label]["cbt"] - v["cbt"],
            f"CBT({a.label}) − CBT(VANILLA)",
            f'{SOURCE} Figure 2: "greater resilience to forgetting"',
        )
        out.append(not_applicable(forgets, NONSHARED_CANNOT_FORGET))
        out.append(
            rests_on(
                _claim(
                    f"{slug(a.label)}.final_gt_vanilla",
                    f"{a.label} ends with a higher final score than VANILLA",
                    +1,
                    m[a.label]["final"] - v["final"],
                    f"final({a.label}) − final(VANILLA)",
                    f"{SOURCE} Table 1: 72.14-73.16% vs 66.16%",
                    paper="+0.060 to +0.070 (Table 1)",
                ),
                [a.label, V],
                ok,
            )
        )
    return out


#: where the baselines' claim comes from: what each is built for, not a paper's finding
BASELINE_SOURCE = "docs/baselines.md: what a forgetting baseline is for"


def baseline_claims(
    arms: Sequence[Arm],
    m: Mapping[str, Mapping[str, Replicates]],
    ok: Mapping[str, bool] | None = None,
) -> list[Claim]:
    """Each forgetting baseline (L2-SP, EWC, LwF, MERGE, REPLAY) forgets less than VANILLA:
    ``CBT(arm) − CBT(VANILLA) > 0``, on the forgetting metric, as a paired bootstrap over the
    same test items (the shared replicates). Khelli et al. 2025 runs none of these baselines, so
    these
    are extensions: a block and a Holm family of their own, so that adding a baseline never
    changes a paper claim's verdict."""
    vanilla = next((a for a in arms if a.method == "vanilla"), None)
    if vanilla is None:
        return []
    v = m[vanilla.label]
    out = []
    for a in (a for a in arms if get_method(a.method).against_forgetting):
        c = _claim(
            f"baseline.{slug(a.label)}.cbt_gt_vanilla",
            f"{a.label} forgets less than VANILLA (higher CBT)",
            +1,
            m[a.label]["cbt"] - v["cbt"],
            f"CBT({a.label}) − CBT(VANILLA)",
            BASELINE_SOURCE,
            kind="extension",
        )
        out.append(rests_on(c, [a.label, vanilla.label], ok or {}))
    return out


def hop_means(hops: int, kind: Kind) -> Callable[..., dict[str, float]]:
    """``(matrices, orders) -> {language: mean over hops of its MFT_h or MBT_h}``."""

    def fn(rs: Mapping[str, np.ndarray], orders: Mapping[str, list[str]]) -> dict[str, float]:
        return hop_average(multi_hop(rs, orders, hops, kind))

    return fn


#: Section 5.2's two script claims: (kind, id part, statement, effect label, figure)
SCRIPT_CLAIMS: tuple[tuple[Kind, str, str, str, str], ...] = (
    (
        "mbt",
        "non_latin_receive_less",
        "non-Latin scripts are more fragile receivers than Latin ones",
        "MBT(non-Latin) − MBT(Latin)",
        "Figure 5",
    ),
    (
        "mft",
        "latin_donate_more",
        "Latin scripts are stronger donors than non-Latin ones",
        "MFT(non-Latin) − MFT(Latin)",
        "Figure 6",
    ),
)


def script_claims(
    arm: Arm,
    orders: Mapping[str, list[str]],
    hops: int,
    ev: Evidence | Pool | None,
    ok: Mapping[str, bool] | None = None,
) -> list[Claim]:
    """Section 5.2 for one sequential arm: non-Latin scripts receive (MBT) and donate (MFT)
    worse. The language is the unit: each language's hop-averaged MBT or MFT (mean over
    orders and, with ``ev`` a :class:`Pool`, over its seeds) and a Welch test of the two
    script groups over languages (:func:`~polymnesia.metrics.seed_tests.group_test`), so the
    verdict is about scripts, not about these languages. Where the groups are too small for
    any test over languages to reach p < 0.05 (an exact permutation test's smallest p,
    :func:`~polymnesia.metrics.seed_tests.smallest_permutation_p`), the claim is not
    testable and says so.
    """
    pool = as_pool([arm], dict(orders), ev)
    found = []
    for kind, part, statement, label, figure in SCRIPT_CLAIMS:
        values = pool.lang_values(arm, hop_means(hops, kind))
        groups: dict[str, list[float]] = {"Latin": [], "non-Latin": []}
        for lang, v in sorted(values.items()):
            if np.isfinite(v):
                groups[group_of(lang, "script")].append(float(v))
        latin, other = groups["Latin"], groups["non-Latin"]
        if not latin or not other:
            continue
        c = claim_from_test(
            f"{statement} ({arm.label}, mean {kind.upper()})",
            -1,
            group_test(other, latin),
            effect_label=label,
            source=f"{SOURCE} section 5.2, {figure}",
            id=f"ll.scripts.{slug(arm.label)}.{part}",
        )
        floor = smallest_permutation_p(len(other), len(latin))
        if floor >= ALPHA:
            c = replace(
                c,
                not_testable=f"{len(other)} non-Latin vs {len(latin)} Latin "
                f"language{'s' if len(latin) != 1 else ''}: no test "
                f"over languages can reach p < {ALPHA:g} (smallest exact permutation p "
                f"{floor:.3f})",
            )
        found.append(c)
    return [rests_on(c, [arm.label], ok or {}) for c in found]


def baselines(
    arms: Sequence[Arm],
    metrics: Mapping[str, Mapping[str, Replicates]],
    ev: Evidence | Pool | None,
    metric: str,
    untrained: Replicates | None,
) -> Table | None:
    """Each task model against chance and majority-class baselines (label tasks only):
    right after learning each language (R's diagonal) and after the last step."""
    if ev is None or not ev.baselines or metric not in ("accuracy", "macro_f1"):
        return None
    base = mean_baselines(ev.baselines)
    pool = as_pool(list(arms), {}, ev)
    rows: list[tuple[str, str, str, Any, Any]] = []
    if untrained is not None:
        rows.append(("untrained", "all languages", metric, untrained.interval(), base))
    for a in arms:
        diag = pool.quantity(a, _diagonal)
        rows.append((a.label, "each right after learning it", metric, diag.interval(), base))
        rows.append(
            (a.label, "all after the last step", metric, metrics[a.label]["final"].interval(), base)
        )
    t = baseline_table(rows)
    seeds = f" and over {len(pool.runs)} training seeds" if pool.several else ""
    t.caption = (
        f"{t.caption} Means over the {len(ev.baselines)} task languages and over orders{seeds}; "
        "the baselines are averaged over the languages' test sets. '× majority' is the "
        "learned-above-chance check (>= 2)."
    )
    return t

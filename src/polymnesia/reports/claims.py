"""A paper's claims judged with uncertainty: holds, contradicted, inconclusive, or set aside.

A :class:`Claim` states what a paper found as the sign of an effect (a
difference between two arms, or a score minus a baseline) and carries what
this run measured: the effect, its confidence interval, ``n`` and the test.
The verdict (:func:`judge`):

* **holds**: the effect has the paper's sign and its interval excludes zero;
* **contradicted**: the opposite sign, and the interval excludes zero;
* **inconclusive**: the interval contains zero (or there is no interval,
  e.g. one seed and no item-level data): this run is too small to tell.

A **non-inferiority** claim ("Phase 2 keeps English ability") carries a
``margin``: the boundary is ``-expected_sign * margin`` instead of zero, so
it holds when the interval lies on the paper's side of that boundary and is
contradicted when it lies wholly beyond it.

**Within seed noise**: a one-seed run's intervals cover test items only. A
claim that carries its protocol's ``seed_band`` (how far effects move with the
training seed alone, :mod:`polymnesia.experiments.seeds`) and would be
contradicted by an effect within that band of its boundary gets this verdict
instead: another seed could flip it.

Two verdicts set a claim aside before any test: **not applicable** (the
premise fails in this run, e.g. a mitigation of a loss that plain training
did not show; ``not_applicable`` gives the reason) and **not testable** (an
arm it rests on did not learn its task, :func:`learned_floor`).

**Multiplicity.** :func:`correct` adjusts the p-values of a report's testable
claims together (Holm's step-down procedure by default, :func:`polymnesia.metrics.stats.holm`);
a claim then counts as significant only where its interval excludes the
boundary *and* its adjusted p is below ``ALPHA``. A claim without a p-value
of its own (an interval against a fixed reference, a non-inferiority margin)
gets one from the normal approximation of its interval (:meth:`Claim.test_p`).

For a test that gives a p-value but no interval (the permutation test),
``p < alpha`` stands in for "the interval excludes zero".

:func:`label_baselines` gives the chance and majority-class scores of a
labelled test set, so a report can say whether a task model learned anything
(:func:`baseline_claim`, :func:`baseline_table`, :func:`learned_floor`).
"""

from __future__ import annotations

import html
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.stats import norm

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.stats import CORRECTIONS, Correction, adjust_p
from polymnesia.metrics.uncertainty import Interval, PairedTest
from polymnesia.reports.table_core import Estimate, Table, to_markdown

Verdict = Literal[
    "holds", "contradicted", "within seed noise", "inconclusive", "not applicable", "not testable"
]
VERDICTS: tuple[Verdict, ...] = (
    "holds",
    "contradicted",
    "within seed noise",
    "inconclusive",
    "not applicable",
    "not testable",
)
ALPHA = 0.05
#: the multiplicity correction every claims block applies (metrics/stats.py)
CORRECTION: Correction = "holm"


def judge(
    expected_sign: int,
    effect: float,
    low: float,
    high: float,
    p_value: float | None = None,
    *,
    margin: float | None = None,
    p_adjusted: float | None = None,
) -> Verdict:
    """The verdict of an effect whose paper sign is ``expected_sign`` (+1 or -1).

    Superiority (``margin`` None): is the effect on the paper's side of zero?
    Non-inferiority: is it on the paper's side of ``-expected_sign * margin``
    (not worse than the margin)? With ``p_adjusted`` (a multiplicity-corrected
    p of the same test) the effect must also pass ``p_adjusted < ALPHA``.
    """
    if expected_sign not in (1, -1):
        raise PolymnesiaError(f"expected_sign must be +1 or -1, got {expected_sign}")
    if margin is not None and not (math.isfinite(margin) and margin >= 0):
        raise PolymnesiaError(f"a non-inferiority margin must be a number >= 0, got {margin}")
    bound = -expected_sign * margin if margin is not None else 0.0
    d = effect - bound
    if math.isfinite(low) and math.isfinite(high):
        significant = low > bound or high < bound
    else:
        significant = p_value is not None and math.isfinite(p_value) and p_value < ALPHA
    if p_adjusted is not None and math.isfinite(p_adjusted):
        significant = significant and p_adjusted < ALPHA
    if not significant or d == 0 or not math.isfinite(d):
        return "inconclusive"
    return "holds" if np.sign(d) == expected_sign else "contradicted"


def format_p(p: float | None) -> str:
    """ "0.041", "< 0.001" (never "0"), "–" for no p-value."""
    if p is None or not math.isfinite(p):
        return "–"
    if p < 0.001:
        return "< 0.001"
    return f"{p:.3f}"


def p_text(p: float | None) -> str:
    """ "p = 0.041", "p < 0.001" or "no p-value", for running text."""
    shown = format_p(p)
    if shown == "–":
        return "no p-value"
    return f"p {shown}" if shown.startswith("<") else f"p = {shown}"


@dataclass(frozen=True)
class Claim:
    """A paper's finding (``statement``) as the expected sign of ``effect``, with this run's
    evidence.

    ``effect`` is what was measured (e.g. ``score(AFA) - score(BA)``; say which in
    ``effect_label``), ``low``/``high`` its interval at ``level``, ``n`` the items
    or seeds behind it, ``test`` how it was obtained, ``source`` where the
    paper says so.
    """

    statement: str
    expected_sign: int
    effect: float
    low: float
    high: float
    n: int
    test: str
    p_value: float | None = None
    effect_label: str = ""
    source: str = ""
    level: float = 0.95
    margin: float | None = None
    not_applicable: str = ""
    not_testable: str = ""
    p_adjusted: float | None = None
    correction: str = ""
    seed_band: float | None = None

    @property
    def testable(self) -> bool:
        """False for a claim set aside as not applicable or not testable."""
        return not (self.not_applicable or self.not_testable)

    @property
    def verdict(self) -> Verdict:
        if self.not_testable:
            return "not testable"
        if self.not_applicable:
            return "not applicable"
        verdict = judge(
            self.expected_sign,
            self.effect,
            self.low,
            self.high,
            self.test_p(),
            margin=self.margin,
            p_adjusted=self.p_adjusted,
        )
        if verdict == "contradicted" and self.seed_band is not None:
            bound = -self.expected_sign * self.margin if self.margin is not None else 0.0
            if abs(self.effect - bound) <= self.seed_band:
                return "within seed noise"
        return verdict

    @property
    def reason(self) -> str:
        """Why the claim was set aside ("" for a tested claim)."""
        return self.not_testable or self.not_applicable

    def test_p(self) -> float | None:
        """The two-sided p-value of this claim's own test: the test's p for a superiority
        claim that has one; otherwise (a non-inferiority margin, or an interval with no p)
        from the normal approximation of the interval, ``se = half-width / z_{(1+level)/2}``,
        ``z = (effect - boundary) / se``, so that ``p < 1 - level`` exactly where the interval
        excludes the boundary."""
        if self.margin is None and self.p_value is not None and math.isfinite(self.p_value):
            return self.p_value
        if not (
            math.isfinite(self.low) and math.isfinite(self.high) and math.isfinite(self.effect)
        ):
            return None
        bound = -self.expected_sign * self.margin if self.margin is not None else 0.0
        d = self.effect - bound
        se = (self.high - self.low) / (2 * float(norm.ppf((1 + self.level) / 2)))
        if se <= 0:
            return 1.0 if d == 0 else 0.0
        return float(min(1.0, 2 * norm.sf(abs(d) / se)))

    def evidence(self, fmt: str = ".3f") -> str:
        """ "+0.042 [+0.010, +0.075]" (or the effect alone when there is no interval), then the
        non-inferiority margin where there is one."""
        eff = format(self.effect, "+" + fmt)
        if math.isfinite(self.low) and math.isfinite(self.high):
            eff += f" [{format(self.low, '+' + fmt)}, {format(self.high, '+' + fmt)}]"
        if self.margin is not None:
            eff += f"; margin {format(-self.expected_sign * self.margin, '+' + fmt)}"
        if self.seed_band is not None:
            eff += f"; seed-noise band ±{format(self.seed_band, fmt)}"
        return eff

    def shown_p(self) -> str:
        """The p-value the verdict used: adjusted when the claim went through a correction."""
        if not self.testable:
            return "–"
        return format_p(self.p_adjusted if self.p_adjusted is not None else self.test_p())

    def verdict_text(self) -> str:
        """The verdict as shown: "✔ holds", "⊘ not testable: arm X did not learn"."""
        badge = _BADGE[self.verdict]
        return f"{badge}: {self.reason}" if self.reason else badge


def correct(claims: Sequence[Claim], method: Correction = CORRECTION) -> list[Claim]:
    """The claims with ``p_adjusted`` set by ``method`` over the family of testable claims that
    have a p-value (:meth:`Claim.test_p`); claims set aside stay out of the family.
    Idempotent: the adjustment always starts from each claim's own p."""
    ps = [c.test_p() if c.testable else None for c in claims]
    adj = adjust_p(ps, method)
    out = []
    for c, p, a in zip(claims, ps, adj, strict=True):
        if p is None or not math.isfinite(a):
            out.append(replace(c, p_adjusted=None, correction=""))
        else:
            out.append(replace(c, p_adjusted=a, correction=method))
    return out


def not_testable(claim: Claim, arms: Sequence[str], why: str = "did not learn") -> Claim:
    """``claim`` set aside because the arms named in ``arms`` did not learn (see
    :func:`learned_floor`), or ``why`` they fall short otherwise.
    """
    if not arms:
        return claim
    names = " and ".join(arms)
    return replace(claim, not_testable=f"arm{'s' if len(arms) > 1 else ''} {names} {why}")


def rests_on(
    claim: Claim, arms: Sequence[str], ok: Mapping[str, bool], why: str = "did not learn"
) -> Claim:
    """``claim`` as not testable when an arm it compares is ``False`` in ``ok`` (arm -> learned?,
    :func:`learned_arms_of`); an arm ``ok`` does not name is not checked."""
    return not_testable(claim, [a for a in dict.fromkeys(arms) if not ok.get(a, True)], why)


def not_applicable(claim: Claim, reason: str) -> Claim:
    """``claim`` set aside with ``reason`` (its premise does not hold in this run)."""
    return replace(claim, not_applicable=reason)


def claim_from_test(
    statement: str,
    expected_sign: int,
    test: PairedTest,
    *,
    effect_label: str = "",
    source: str = "",
) -> Claim:
    """A claim whose evidence is a paired test (``effect = a - b``, see
    :mod:`polymnesia.metrics.uncertainty`).
    """
    return Claim(
        statement,
        expected_sign,
        test.effect,
        test.low,
        test.high,
        test.n,
        test.method,
        test.p_value,
        effect_label,
        source,
        test.level,
    )


def claim_from_interval(
    statement: str,
    expected_sign: int,
    interval: Interval,
    *,
    reference: float = 0.0,
    effect_label: str = "",
    source: str = "",
) -> Claim:
    """A claim about ``interval.estimate - reference`` (a score against a fixed baseline)."""
    return Claim(
        statement,
        expected_sign,
        interval.estimate - reference,
        interval.low - reference,
        interval.high - reference,
        interval.n,
        interval.method or "interval",
        None,
        effect_label,
        source,
        interval.level,
    )


# ------------------------------------------------------------------- rendering

_BADGE = {
    "holds": "✔ holds",
    "contradicted": "✘ contradicted",
    "within seed noise": "≈ within seed noise",
    "inconclusive": "? inconclusive",
    "not applicable": "– not applicable",
    "not testable": "⊘ not testable",
}


def _corrected(claims: Sequence[Claim]) -> list[Claim]:
    """The claims after the block's multiplicity correction (kept if already applied)."""
    if any(c.correction for c in claims):
        return list(claims)
    return correct(claims)


def verdict_summary(claims: Sequence[Claim]) -> str:
    """ "1 of 4 claims holds, 1 contradicted, 2 inconclusive at this run's size (...)"."""
    if not claims:
        return "No claim could be checked in this run."
    claims = _corrected(claims)
    counts = Counter(c.verdict for c in claims)
    aside = [f"{counts[v]} {v}" for v in ("not applicable", "not testable") if counts[v]]
    family = sum(1 for c in claims if c.correction)
    method = next((c.correction for c in claims if c.correction), CORRECTION)
    text = (
        f"{counts['holds']} of {len(claims)} claims hold{'s' if counts['holds'] == 1 else ''}, "
        f"{counts['contradicted']} contradicted, "
        + (
            f"{counts['within seed noise']} within seed noise, "
            if counts["within seed noise"]
            else ""
        )
        + f"{counts['inconclusive']} inconclusive"
        + "".join(f", {a}" for a in aside)
        + " at this run's size (holds / contradicted: the effect's interval excludes the boundary, "
        "zero or a non-inferiority margin, and the adjusted p is below "
        f"{ALPHA:g}; inconclusive: not both)."
    )
    if counts["within seed noise"]:
        text += (
            " Within seed noise: the test contradicts the claim, but by less than the protocol's "
            "seed-noise band, and this run has one training seed."
        )
    if family:
        text += (
            f" p-values are adjusted with {CORRECTIONS[method]} over the {family} tested "
            f"claim{'s' if family != 1 else ''}."
        )
    return text


def claims_table(claims: Sequence[Claim], fmt: str = ".3f") -> Table:
    """The claims as a :class:`Table` (also written as ``claims.csv``), after the correction."""
    claims = _corrected(claims)
    rows = [
        [
            i + 1,
            c.statement,
            c.verdict_text(),
            (c.effect_label + ": " if c.effect_label else "") + c.evidence(fmt),
            c.shown_p(),
            c.n,
            c.test + (f"; {c.source}" if c.source else ""),
        ]
        for i, c in enumerate(claims)
    ]
    level = f"{round(100 * claims[0].level)}%" if claims else "95%"
    method = next((c.correction for c in claims if c.correction), CORRECTION)
    label = {"holm": "Holm", "benjamini-hochberg": "BH"}[method]
    return Table(
        name="claims",
        title="",
        columns=[
            "#",
            "Claim (paper)",
            "Verdict",
            f"Effect [{level} CI]",
            f"p ({label})",
            "n",
            "Test",
        ],
        rows=rows,
    )


def claims_markdown(claims: Sequence[Claim], fmt: str = ".3f") -> str:
    """A Markdown block: the verdict summary, then one row per claim."""
    return f"{verdict_summary(claims)}\n\n{to_markdown(claims_table(claims, fmt), fmt)}"


def _arrows(text: str) -> str:
    """Escaped text whose "->" never breaks across lines."""
    return text.replace("-&gt;", '<span class="nw">-&gt;</span>')


def claims_html(claims: Sequence[Claim], fmt: str = ".3f") -> str:
    """An HTML block: the summary and a table with a coloured verdict per claim. Laid out to
    fit a laptop window: fixed column shares, the effect's label above its numbers, long
    test descriptions wrapped (docs/reports.md, "The HTML report")."""
    claims = _corrected(claims)
    rows = []
    for i, c in enumerate(claims):
        label = (
            f'<span class="label">{html.escape(c.effect_label)}</span> ' if c.effect_label else ""
        )
        effect = (
            label + f'<span class="num">{html.escape(replace(c, margin=None).evidence(fmt))}</span>'
        )
        if c.margin is not None:
            bound = format(-c.expected_sign * c.margin, "+" + fmt)
            effect += f' <span class="margin">non-inferiority margin {bound}</span>'
        test = html.escape(c.test) + (
            f'<span class="source">{html.escape(c.source)}</span>' if c.source else ""
        )
        badge = html.escape(_BADGE[c.verdict])
        why = f'<span class="why">{_arrows(html.escape(c.reason))}</span>' if c.reason else ""
        rows.append(
            f'<tr class="claim {c.verdict.replace(" ", "-")}"><td>{i + 1}</td>'
            f"<td>{_arrows(html.escape(c.statement))}</td>"
            f'<td class="verdict"><span class="badge">{badge}</span>{why}</td>'
            f'<td class="effect">{effect}</td><td class="p">{html.escape(c.shown_p())}</td>'
            f'<td class="n">{c.n}</td><td class="test">{test}</td></tr>'
        )
    columns = claims_table(claims[:1], fmt).columns
    cols = "".join(f'<col class="c{i}">' for i in range(len(columns)))
    head = "".join(f"<th>{html.escape(h)}</th>" for h in columns)
    return (
        f'<div class="claims"><p>{html.escape(verdict_summary(claims))}</p>\n'
        f'<div class="table-wrap"><table class="claims-table"><colgroup>{cols}</colgroup>\n'
        f"<thead><tr>{head}</tr></thead>\n<tbody>\n"
        + "\n".join(rows)
        + "\n</tbody>\n</table></div></div>"
    )


# ------------------------------------------------------------------- baselines


@dataclass(frozen=True)
class Baselines:
    """Scores a model reaches without learning, on a test set with ``n`` gold labels of ``n_labels``
    classes.

    ``chance_*``: guessing uniformly at random (accuracy ``1/k``; macro-F1 at
    the expected counts, ``mean_l 2 p_l (1/k) / (p_l + 1/k)`` for class shares
    ``p_l``). ``majority_*``: always answering the most frequent class
    (accuracy ``p_max``; macro-F1 ``2 p_max / (1 + p_max) / k``, the other
    classes scoring 0).
    """

    n: int
    n_labels: int
    majority_label: int
    chance_accuracy: float
    chance_macro_f1: float
    majority_accuracy: float
    majority_macro_f1: float

    def chance(self, metric: str) -> float:
        return self._pick(metric, self.chance_accuracy, self.chance_macro_f1)

    def majority(self, metric: str) -> float:
        return self._pick(metric, self.majority_accuracy, self.majority_macro_f1)

    @staticmethod
    def _pick(metric: str, acc: float, f1: float) -> float:
        if metric == "accuracy":
            return acc
        if metric == "macro_f1":
            return f1
        raise PolymnesiaError(f"no baseline for metric '{metric}'; accepted: accuracy, macro_f1")


def label_baselines(gold: npt.ArrayLike, n_labels: int | None = None) -> Baselines:
    """Chance and majority-class baselines of the gold labels ``gold`` (ints ``0..n_labels-1``)."""
    g = np.asarray(gold).astype(int)
    if g.ndim != 1 or g.size == 0:
        raise PolymnesiaError("baselines need a non-empty list of gold labels")
    k = int(n_labels) if n_labels is not None else int(g.max()) + 1
    if k < 2 or g.min() < 0 or g.max() >= k:
        raise PolymnesiaError(f"gold labels must lie in 0..{k - 1} with at least 2 classes")
    share = np.bincount(g, minlength=k) / g.size
    top = int(np.argmax(share))
    chance_f1 = float(np.mean(2 * share * (1 / k) / (share + 1 / k)))
    p = float(share[top])
    return Baselines(int(g.size), k, top, 1 / k, chance_f1, p, 2 * p / (1 + p) / k)


def baseline_claim(model: str, scope: str, metric: str, score: Interval, base: Baselines) -> Claim:
    """ "MODEL learned the task on SCOPE": its score minus the majority-class baseline is > 0."""
    return claim_from_interval(
        f"{model} scores above the majority-class baseline on {scope} ({metric})",
        +1,
        score,
        reference=base.majority(metric),
        effect_label=f"{metric} − majority",
    )


def learned_floor(base: Baselines, metric: str) -> float:
    """The score a task model must reach to count as having learned: twice the larger of
    uniform chance and the majority-class score, ``2 b``; where ``2 b`` is out of reach
    (``b > 1/3``: binary accuracy, a skewed test set) halfway from ``b`` to a perfect score,
    ``(1 + b) / 2`` instead. A claim resting on an arm below it is "not testable"
    (docs/reports.md, "Did the task models learn?")."""
    b = max(base.chance(metric), base.majority(metric))
    return min(2 * b, (1 + b) / 2)


def learned(score: float, base: Baselines, metric: str) -> bool:
    """Whether ``score`` reaches :func:`learned_floor` (NaN: no)."""
    return math.isfinite(score) and score >= learned_floor(base, metric)


def learned_arms_of(
    rows: Sequence[tuple[str, str, str, Interval, Baselines]], scope: str | None = None
) -> dict[str, bool]:
    """``{model: learned?}`` from :func:`baseline_table`'s rows (of ``scope`` when given): an arm
    learned when every one of its rows reaches :func:`learned_floor`."""
    out: dict[str, bool] = {}
    for model, where, metric, iv, base in rows:
        if scope is None or where == scope:
            out[model] = out.get(model, True) and learned(iv.estimate, base, metric)
    return out


def baseline_table(
    rows: Sequence[tuple[str, str, str, Interval, Baselines]],
    name: str = "baselines",
    title: str = "Did the task models learn? Scores against chance and majority-class baselines",
    fmt: str = ".3f",
) -> Table:
    """One row per ``(model, scope, metric, score interval, baselines)``.

    "x baseline" is the score divided by the larger of chance and majority;
    "Learned" reads "learned" when the score reaches :func:`learned_floor`
    (twice that baseline), "above baseline, below 2x" when its interval lies
    above the baseline but the score is short of the floor, and "did not
    learn" otherwise. A claim that rests on an arm that did not reach the
    floor is not testable.
    """
    out: list[list[object]] = []
    for _model, scope, metric, iv, base in rows:
        top = max(base.chance(metric), base.majority(metric))
        if learned(iv.estimate, base, metric):
            verdict = "learned"
        elif math.isfinite(iv.low) and iv.low > top:
            verdict = "above baseline, below 2x"
        else:
            verdict = "did not learn"
        out.append(
            [
                _model,
                scope,
                metric,
                Estimate.of(iv),
                base.chance(metric),
                base.majority(metric),
                iv.estimate / top if top else math.nan,
                verdict,
                base.n,
            ]
        )
    return _learned_table(
        name,
        title,
        ["Chance", "Majority", "x baseline"],
        out,
        "Chance: uniform guessing; majority: always the most frequent class of the test labels; "
        "x baseline: the score over the larger of the two. Learned: the score reaches twice that "
        "baseline (halfway to a perfect score where twice is out of reach); a claim that rests "
        "on an arm that did not learn is not testable.",
    )


def trivial_table(
    rows: Sequence[tuple[str, str, str, Interval, str, float]],
    name: str = "baselines_trivial",
    title: str = "Did the task models learn? Scores against a trivial answer",
    fmt: str = ".3f",
) -> Table:
    """One row per ``(model, scope, metric, score interval, trivial answer, its score)``, for
    tasks without class labels (tagging, extractive QA): "Learned" reads "above the trivial
    answer" when the score's interval lies above that answer's score, "below" when it lies
    below it, "not distinguishable" otherwise."""
    out: list[list[object]] = []
    for model, scope, metric, iv, answer, value in rows:
        if iv.low > value:
            learned = "above the trivial answer"
        elif iv.high < value:
            learned = "below the trivial answer"
        else:
            learned = "not distinguishable"
        ratio = iv.estimate / value if value else math.nan
        out.append([model, scope, metric, Estimate.of(iv), answer, value, ratio, learned, iv.n])
    return _learned_table(
        name,
        title,
        ["Trivial answer", "Its score", "x trivial"],
        out,
        "Trivial answer: what a predictor that learned nothing about the task scores on "
        "the same test items (extractive QA: the whole passage; tagging: the language's most "
        "frequent tag for every word), averaged over the languages like the score.",
        fmt,
    )


def _learned_table(
    name: str,
    title: str,
    baseline_columns: list[str],
    rows: list[list[object]],
    caption: str,
    fmt: str | None = None,
) -> Table:
    """A "did the task models learn?" table: model, languages, metric and score, the
    baseline's columns, then the verdict and n."""
    columns = ["Model", "Languages", "Metric", "Score", *baseline_columns, "Learned", "n"]
    return Table(name, title, columns, rows, caption=caption, floatfmt=fmt)

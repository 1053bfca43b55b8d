"""A paper's claims judged with uncertainty: holds, contradicted or inconclusive.

A :class:`Claim` states what a paper found as the sign of an effect (a
difference between two arms, or a score minus a baseline) and carries what
this run measured: the effect, its confidence interval, ``n`` and the test.
The verdict (:func:`judge`):

* **holds**: the effect has the paper's sign and its interval excludes zero;
* **contradicted**: the opposite sign, and the interval excludes zero;
* **inconclusive**: the interval contains zero (or there is no interval,
  e.g. one seed and no item-level data): this run is too small to tell.

For a test that gives a p-value but no interval (the permutation test),
``p < alpha`` stands in for "the interval excludes zero".

:func:`label_baselines` gives the chance and majority-class scores of a
labelled test set, so a report can say whether a task model learned anything
(:func:`baseline_claim`, :func:`baseline_table`).
"""

from __future__ import annotations

import html
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.uncertainty import Interval, PairedTest
from polymnesia.reports.table_core import Estimate, Table, to_markdown

Verdict = Literal["holds", "contradicted", "inconclusive"]
VERDICTS: tuple[Verdict, ...] = ("holds", "contradicted", "inconclusive")
ALPHA = 0.05


def judge(
    expected_sign: int, effect: float, low: float, high: float, p_value: float | None = None
) -> Verdict:
    """The three-way verdict of an effect whose paper sign is ``expected_sign`` (+1 or -1)."""
    if expected_sign not in (1, -1):
        raise PolymnesiaError(f"expected_sign must be +1 or -1, got {expected_sign}")
    if math.isfinite(low) and math.isfinite(high):
        significant = low > 0 or high < 0
    else:
        significant = p_value is not None and math.isfinite(p_value) and p_value < ALPHA
    if not significant or effect == 0 or not math.isfinite(effect):
        return "inconclusive"
    return "holds" if np.sign(effect) == expected_sign else "contradicted"


@dataclass(frozen=True)
class Claim:
    """A paper's finding (``statement``) as the expected sign of ``effect``, with this run's evidence.

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

    @property
    def verdict(self) -> Verdict:
        return judge(self.expected_sign, self.effect, self.low, self.high, self.p_value)

    def evidence(self, fmt: str = ".3f") -> str:
        """ "+0.042 [+0.010, +0.075]" (or the effect alone when there is no interval)."""
        eff = format(self.effect, "+" + fmt)
        if math.isfinite(self.low) and math.isfinite(self.high):
            eff += f" [{format(self.low, '+' + fmt)}, {format(self.high, '+' + fmt)}]"
        if self.p_value is not None and math.isfinite(self.p_value):
            eff += f", p = {self.p_value:.3g}"
        return eff


def claim_from_test(
    statement: str,
    expected_sign: int,
    test: PairedTest,
    *,
    effect_label: str = "",
    source: str = "",
) -> Claim:
    """A claim whose evidence is a paired test (``effect = a - b``, see :mod:`polymnesia.metrics.uncertainty`)."""
    return Claim(
        statement, expected_sign, test.effect, test.low, test.high, test.n, test.method,
        test.p_value, effect_label, source, test.level,
    )  # fmt: skip


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
        statement, expected_sign, interval.estimate - reference, interval.low - reference,
        interval.high - reference, interval.n, interval.method or "interval", None,
        effect_label, source, interval.level,
    )  # fmt: skip


# ------------------------------------------------------------------- rendering

_BADGE = {"holds": "✔ holds", "contradicted": "✘ contradicted", "inconclusive": "? inconclusive"}


def verdict_summary(claims: Sequence[Claim]) -> str:
    """ "1 of 4 claims holds, 1 is contradicted, 2 are inconclusive at this run's size."""
    counts = Counter(c.verdict for c in claims)
    if not claims:
        return "No claim could be checked in this run."
    return (
        f"{counts['holds']} of {len(claims)} claims hold{'s' if counts['holds'] == 1 else ''}, "
        f"{counts['contradicted']} contradicted, {counts['inconclusive']} inconclusive at this run's size "
        "(holds / contradicted: the effect's interval excludes zero; inconclusive: it does not)."
    )


def claims_table(claims: Sequence[Claim], fmt: str = ".3f") -> Table:
    """The claims as a :class:`Table` (also written as ``claims.csv``)."""
    rows = [
        [
            i + 1,
            c.statement,
            _BADGE[c.verdict],
            (c.effect_label + ": " if c.effect_label else "") + c.evidence(fmt),
            c.n,
            c.test + (f"; {c.source}" if c.source else ""),
        ]
        for i, c in enumerate(claims)
    ]
    level = f"{round(100 * claims[0].level)}%" if claims else "95%"
    return Table(
        name="claims",
        title="",
        columns=["#", "Claim (paper)", "Verdict", f"Effect [{level} CI]", "n", "Test"],
        rows=rows,
    )


def claims_markdown(claims: Sequence[Claim], fmt: str = ".3f") -> str:
    """A Markdown block: the verdict summary, then one row per claim."""
    return f"{verdict_summary(claims)}\n\n{to_markdown(claims_table(claims, fmt), fmt)}"


def claims_html(claims: Sequence[Claim], fmt: str = ".3f") -> str:
    """An HTML block: the summary and a table with a coloured verdict per claim."""
    rows = []
    for i, c in enumerate(claims):
        effect = (html.escape(c.effect_label) + ": " if c.effect_label else "") + html.escape(
            c.evidence(fmt)
        )
        test = html.escape(c.test + (f"; {c.source}" if c.source else ""))
        rows.append(
            f'<tr class="claim {c.verdict}"><td>{i + 1}</td><td>{html.escape(c.statement)}</td>'
            f'<td class="verdict">{_BADGE[c.verdict]}</td><td>{effect}</td><td>{c.n}</td><td>{test}</td></tr>'
        )
    head = "".join(f"<th>{html.escape(h)}</th>" for h in claims_table(claims[:1], fmt).columns)
    return (
        f'<div class="claims"><p>{html.escape(verdict_summary(claims))}</p>\n'
        f'<div class="table-wrap"><table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n'
        + "\n".join(rows)
        + "\n</tbody>\n</table></div></div>"
    )


# ------------------------------------------------------------------- baselines


@dataclass(frozen=True)
class Baselines:
    """Scores a model reaches without learning, on a test set with ``n`` gold labels of ``n_labels`` classes.

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


def baseline_table(
    rows: Sequence[tuple[str, str, str, Interval, Baselines]],
    name: str = "baselines",
    title: str = "Did the task models learn? Scores against chance and majority-class baselines",
    fmt: str = ".3f",
) -> Table:
    """One row per ``(model, scope, metric, score interval, baselines)``.

    "Learned" reads "above majority" when the score's interval lies above the
    majority-class baseline, "below majority" when it lies below, and "not
    distinguishable" otherwise; "x majority" is the score divided by that
    baseline (the learned-above-chance check of docs/reports.md asks for >= 2).
    """
    out: list[list[object]] = []
    for model, scope, metric, iv, base in rows:
        maj = base.majority(metric)
        verdict = baseline_claim(model, scope, metric, iv, base).verdict
        learned = {"holds": "above majority", "contradicted": "below majority"}.get(
            verdict, "not distinguishable"
        )
        out.append(
            [
                model,
                scope,
                metric,
                Estimate.of(iv),
                base.chance(metric),
                maj,
                iv.estimate / maj if maj else math.nan,
                learned,
                base.n,
            ]
        )
    return _learned_table(
        name,
        title,
        ["Chance", "Majority", "x majority"],
        out,
        "Chance: uniform guessing; majority: always the most frequent class of the test labels.",
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
    name: str, title: str, baseline_columns: list[str], rows: list[list[object]], caption: str,
    fmt: str | None = None,
) -> Table:  # fmt: skip
    """A "did the task models learn?" table: model, languages, metric and score, the
    baseline's columns, then the verdict and n."""
    columns = ["Model", "Languages", "Metric", "Score", *baseline_columns, "Learned", "n"]
    return Table(name, title, columns, rows, caption=caption, floatfmt=fmt)

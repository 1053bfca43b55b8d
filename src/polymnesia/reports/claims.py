"""A paper's claims judged with uncertainty: holds, contradicted, inconclusive, or set aside.

A :class:`Claim` states what a paper found as the sign of an effect (a
difference between two arms, or a score minus a baseline) and carries what
this run measured: the effect, its confidence interval with its degrees of
freedom (``df``; None: a normal or bootstrap interval), ``n`` and the test.
Each claim has a stable ``id`` (a dotted slug such as
``"af.isotropy.afa_lt_baseline"``, set where its protocol builds it), a
``kind`` and a ``design``:

* ``kind`` ``"paper"``: a finding of the paper, naming its section or table in
  ``source``; ``"extension"``: a comparison the paper does not make (an arm it
  never ran, a pair it never compared), judged in a block and a Holm family of
  its own so that adding one never changes a paper claim's verdict;
  ``"precondition"``: a check of this run's setup ("Phase 1 teaches the English
  tasks"), shown apart, left out of the counts and of the correction; a claim
  whose ``premise`` (a precondition's id) does not hold is "not applicable";
* ``design``: ``"superiority"`` (the sign of the effect), ``"non-inferiority"``
  (not worse than a ``margin``), ``"equivalence"`` (within ``±margin``) or
  ``"correlation"`` (the sign of a correlation coefficient).

The verdict (:func:`~polymnesia.reports.verdicts.judge`):

* **holds**: the effect has the paper's sign and its interval excludes zero
  (the boundary) and the Holm-adjusted p is below ``ALPHA``;
* **contradicted**: the opposite sign, with the same evidence;
* **inconclusive**: not both: this run is too small to tell.

A **non-inferiority** claim ("Phase 2 keeps English ability") carries a
``margin``: the boundary is ``-expected_sign * margin`` instead of zero.

**Seed noise.** A one-seed run's intervals cover test items only. Such a claim
is judged on its item interval widened by the seed-to-seed standard deviation
of its effect, measured on *other* seeds of the same config at the same size
(``noise``, :class:`~polymnesia.reports.verdicts.SeedNoise`; :mod:`polymnesia.experiments.seeds`):
``se² = se_item² + sd_seed²``, with a Student t quantile at the
Welch-Satterthwaite degrees of freedom of the two (the band's own ``df`` when
the seed term dominates). The band widens the interval on both sides, so it
can turn a "holds" into "inconclusive" exactly as it can a "contradicted". A
one-seed claim with no measured band reads **seed noise not measured**
(``unmeasured`` gives why); it is neither holds nor contradicted.

Set aside before any test: **not applicable** (the premise fails in this run;
``not_applicable`` gives the reason) and **not testable** (an arm it rests on
did not learn its task, :func:`~polymnesia.reports.baselines.learned_floor`; or its
interval has zero width: every resample gave the same effect, which is no evidence either
way).

**p-values** come from the same distribution as the interval: a superiority
claim uses its test's own p; otherwise (a margin, an interval without a p, a
band) the p is read off the interval with Student t at its ``df`` (normal
only when ``df`` is unknown or infinite), so ``p < 1 - level`` exactly where
the interval excludes the boundary (:meth:`Claim.test_p`).

**Multiplicity.** :func:`correct` adjusts the p-values by Holm's step-down
procedure (:func:`polymnesia.metrics.stats.holm`) within each family: the
paper's testable claims, and, apart, the extensions. The claims table shows
the raw and the adjusted p.

For a test that gives a p-value but no interval (the permutation test),
``p < alpha`` stands in for "the interval excludes zero".

Beside this module: :mod:`polymnesia.reports.verdicts` (the verdict vocabulary, the rule
of :func:`~polymnesia.reports.verdicts.judge`, seed-noise bands and p-value formatting),
:mod:`polymnesia.reports.claims_table` (the claims section in Markdown and HTML) and
:mod:`polymnesia.reports.baselines` (chance and majority-class scores of a labelled test
set, so a report can say whether a task model learned anything).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.stats import Correction, adjust_p
from polymnesia.metrics.uncertainty import Interval, PairedTest
from polymnesia.reports.verdicts import (
    BADGE,
    CORRECTION,
    DESIGNS,
    KINDS,
    ZERO_WIDTH,
    Design,
    Kind,
    SeedNoise,
    Verdict,
    finite_df,
    format_df,
    format_p,
    judge,
    one_sided_p,
    quantile,
    two_sided_p,
)


@dataclass(frozen=True)
class Claim:
    """A paper's finding (``statement``) as the expected sign of ``effect``, with this run's
    evidence.

    ``effect`` is what was measured (e.g. ``score(AFA) - score(BA)``; say which in
    ``effect_label``), ``low``/``high`` its interval at ``level`` with ``df`` degrees of
    freedom (None: normal or bootstrap), ``n`` the items or seeds behind it, ``test`` how it
    was obtained, ``source`` where the paper says so (its section or table). ``id``,
    ``kind``, ``design``, ``noise``, ``unmeasured`` and ``premise``: the module docstring.
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
    id: str = ""
    kind: Kind = "paper"
    design: Design | None = None
    df: float | None = None
    noise: SeedNoise | None = None
    unmeasured: str = ""
    premise: str = ""
    paper: str = ""
    headroom: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise PolymnesiaError(f"unknown claim kind '{self.kind}'; accepted: {', '.join(KINDS)}")
        if self.design is not None and self.design not in DESIGNS:
            raise PolymnesiaError(
                f"unknown claim design '{self.design}'; accepted: {', '.join(DESIGNS)}"
            )

    @property
    def test_design(self) -> Design:
        """``design``, else non-inferiority with a margin and superiority without."""
        if self.design is not None:
            return self.design
        return "non-inferiority" if self.margin is not None else "superiority"

    @property
    def zero_width(self) -> bool:
        """True for a finite interval of zero width (no evidence)."""
        return math.isfinite(self.low) and math.isfinite(self.high) and self.low == self.high

    @property
    def testable(self) -> bool:
        """False for a claim set aside (not applicable, not testable, seed noise not
        measured)."""
        return not self.reason

    @property
    def reason(self) -> str:
        """Why the claim was set aside ("" for a tested claim)."""
        if self.not_testable or self.not_applicable:
            return self.not_testable or self.not_applicable
        if self.zero_width:
            return ZERO_WIDTH
        if self.unmeasured and self.kind != "precondition":
            return self.unmeasured
        return ""

    @property
    def verdict(self) -> Verdict:
        if self.not_testable or (self.zero_width and not self.not_applicable):
            return "not testable"
        if self.not_applicable:
            return "not applicable"
        if self.unmeasured and self.kind != "precondition":
            return "seed noise not measured"
        low, high, _ = self.judged()
        return judge(
            self.expected_sign,
            self.effect,
            low,
            high,
            self.test_p(),
            margin=self.margin,
            p_adjusted=self.p_adjusted,
            design=self.test_design,
        )

    def se_item(self) -> float:
        """The standard error the interval implies: half its width over its quantile
        (NaN without an interval)."""
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            return math.nan
        return (self.high - self.low) / (2 * quantile(self.level, self.df))

    def judged(self) -> tuple[float, float, float | None]:
        """``(low, high, df)`` of the interval the verdict reads: the claim's own, or, with
        ``noise``, ``effect ± t · sqrt(se_item² + sd_seed²)`` at the Welch-Satterthwaite df of
        the item term (``df``; None: infinite) and the seed term (the band's df)."""
        if self.noise is None or not math.isfinite(self.se_item()):
            return self.low, self.high, self.df
        se_i, sd = self.se_item(), self.noise.sd
        var = se_i**2 + sd**2
        if var == 0:
            return self.low, self.high, self.df
        item_term = se_i**4 / self.df if self.df is not None and finite_df(self.df) else 0.0
        seed_term = sd**4 / self.noise.df
        df = var**2 / (item_term + seed_term) if item_term + seed_term > 0 else None
        half = quantile(self.level, df) * math.sqrt(var)
        return self.effect - half, self.effect + half, df

    def test_p(self) -> float | None:
        """The two-sided p-value of this claim's own test, from the distribution of the
        interval the verdict reads (:meth:`judged`): the test's own p for a superiority
        claim without seed noise; otherwise ``z = (effect - boundary) / se`` with
        ``se = half-width / q``, ``q`` the interval's quantile (Student t at its df, normal
        when the df is unknown), and the p of ``z`` in the same distribution, so that
        ``p < 1 - level`` exactly where the interval excludes the boundary. Equivalence: twice
        the larger of the two one-sided p-values at ``±margin`` (below ``1 - level`` exactly
        where the interval lies inside the margins)."""
        design = self.test_design
        own = self.p_value is not None and math.isfinite(self.p_value)
        if design in ("superiority", "correlation") and own and self.noise is None:
            return self.p_value
        low, high, df = self.judged()
        if not (math.isfinite(low) and math.isfinite(high) and math.isfinite(self.effect)):
            return self.p_value if own and design != "equivalence" else None
        se = (high - low) / (2 * quantile(self.level, df))
        if design == "equivalence":
            assert self.margin is not None
            if se <= 0:
                return 0.0 if abs(self.effect) < self.margin else 1.0
            worst = max(
                one_sided_p((self.effect + self.margin) / se, df),
                one_sided_p((self.margin - self.effect) / se, df),
            )
            return float(min(1.0, 2 * worst))
        bound = -self.expected_sign * self.margin if self.margin is not None else 0.0
        d = self.effect - bound
        if se <= 0:
            return 1.0 if d == 0 else 0.0
        return two_sided_p(d / se, df)

    def evidence(self, fmt: str = ".3f") -> str:
        """ "+0.042 [+0.010, +0.075]" (or the effect alone when there is no interval; "–" for
        an effect that could not be measured), then the interval with seed noise and its band,
        then the margin where there is one."""
        eff = format(self.effect, "+" + fmt) if math.isfinite(self.effect) else "–"
        if math.isfinite(self.low) and math.isfinite(self.high):
            eff += f" [{format(self.low, '+' + fmt)}, {format(self.high, '+' + fmt)}]"
        if self.noise is not None:
            low, high, df = self.judged()
            if math.isfinite(low) and math.isfinite(high):
                eff += (
                    f"; with seed noise [{format(low, '+' + fmt)}, {format(high, '+' + fmt)}], "
                    f"df {format_df(df)}"
                )
            eff += f"; {self.noise.text(fmt)}"
        if self.margin is not None:
            if self.test_design == "equivalence":
                eff += f"; margin ±{format(self.margin, fmt)}"
            else:
                eff += f"; margin {format(-self.expected_sign * self.margin, '+' + fmt)}"
        return eff

    def headroom_share(self) -> float | None:
        """The effect as a share of the room above chance on its scale (``effect /
        headroom``; None without a headroom)."""
        if self.headroom is None or not self.headroom > 0 or not math.isfinite(self.effect):
            return None
        return self.effect / self.headroom

    def context(self) -> str:
        """The effect beside the paper's: "paper: -0.08 (Table 2); -12% of the headroom above
        chance" ("" when neither is known)."""
        parts = [f"paper: {self.paper}"] if self.paper else []
        share = self.headroom_share()
        if share is not None:
            parts.append(f"{100 * share:+.0f}% of the headroom above chance")
        return "; ".join(parts)

    def shown_p(self) -> str:
        """The raw p-value of the claim's own test ("–" for a claim set aside)."""
        return format_p(self.test_p()) if self.testable else "–"

    def shown_p_adjusted(self) -> str:
        """The p-value adjusted within the claim's family ("–" outside any family)."""
        return format_p(self.p_adjusted) if self.testable else "–"

    def verdict_text(self) -> str:
        """The verdict as shown: "✔ holds", "⊘ not testable: arm X did not learn"."""
        badge = BADGE[self.verdict]
        return f"{badge}: {self.reason}" if self.reason else badge


def with_premises(claims: Sequence[Claim]) -> list[Claim]:
    """The claims with each one whose ``premise`` (a precondition's id among ``claims``) does
    not hold set aside as not applicable, naming the precondition and its evidence. A premise
    this run has no precondition for is not checked."""
    pre = {c.id: c for c in claims if c.kind == "precondition" and c.id}
    out = []
    for c in claims:
        p = pre.get(c.premise) if c.premise else None
        if p is not None and c.testable and p.verdict != "holds":
            c = not_applicable(
                c, f"its premise '{p.statement}' is {p.verdict} here ({p.evidence()})"
            )
        out.append(c)
    return out


def correct(claims: Sequence[Claim], method: Correction = CORRECTION) -> list[Claim]:
    """The claims with their premises checked (:func:`with_premises`) and ``p_adjusted`` set by
    ``method`` within each family: the paper's testable claims that have a p-value
    (:meth:`Claim.test_p`), and apart the extensions'; preconditions and claims set aside stay
    out of every family. Idempotent: the adjustment always starts from each claim's own p."""
    claims = with_premises(claims)
    adjusted: dict[int, float] = {}
    for kind in ("paper", "extension"):
        members = [i for i, c in enumerate(claims) if c.kind == kind and c.testable]
        ps = [claims[i].test_p() for i in members]
        for i, a in zip(members, adjust_p(ps, method), strict=True):
            if math.isfinite(a):
                adjusted[i] = a
    out = []
    for i, c in enumerate(claims):
        if i in adjusted:
            out.append(replace(c, p_adjusted=adjusted[i], correction=method))
        else:
            out.append(replace(c, p_adjusted=None, correction=""))
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


def _df_of(x: Interval | PairedTest) -> float | None:
    df = getattr(x, "df", None)
    return None if df is None else float(df)


def claim_from_test(
    statement: str,
    expected_sign: int,
    test: PairedTest,
    *,
    effect_label: str = "",
    source: str = "",
    id: str = "",
    kind: Kind = "paper",
    premise: str = "",
) -> Claim:
    """A claim whose evidence is a paired test (``effect = a - b``, see
    :mod:`polymnesia.metrics.uncertainty`); ``df`` is the test's.
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
        id=id,
        kind=kind,
        df=_df_of(test),
        premise=premise,
    )


def claim_from_interval(
    statement: str,
    expected_sign: int,
    interval: Interval,
    *,
    reference: float = 0.0,
    effect_label: str = "",
    source: str = "",
    id: str = "",
    kind: Kind = "paper",
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
        id=id,
        kind=kind,
        df=_df_of(interval),
    )


def slug(text: str) -> str:
    """A claim-id part from a name: lower case, runs of other characters as ``_``
    (``"SHARED LoRA r8"`` -> ``"shared_lora_r8"``)."""
    out = "".join(ch.lower() if ch.isalnum() else "_" for ch in text)
    return "_".join(p for p in out.split("_") if p) or "_"


# ------------------------------------------------------------------- rendering


# ------------------------------------------------------------------- baselines

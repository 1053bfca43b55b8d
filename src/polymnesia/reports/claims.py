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

The verdict (:func:`judge`):

* **holds**: the effect has the paper's sign and its interval excludes zero
  (the boundary) and the Holm-adjusted p is below ``ALPHA``;
* **contradicted**: the opposite sign, with the same evidence;
* **inconclusive**: not both: this run is too small to tell.

A **non-inferiority** claim ("Phase 2 keeps English ability") carries a
``margin``: the boundary is ``-expected_sign * margin`` instead of zero.

**Seed noise.** A one-seed run's intervals cover test items only. Such a claim
is judged on its item interval widened by the seed-to-seed standard deviation
of its effect, measured on *other* seeds of the same config at the same size
(``noise``, :class:`SeedNoise`; :mod:`polymnesia.experiments.seeds`):
``se² = se_item² + sd_seed²``, with a Student t quantile at the
Welch-Satterthwaite degrees of freedom of the two (the band's own ``df`` when
the seed term dominates). The band widens the interval on both sides, so it
can turn a "holds" into "inconclusive" exactly as it can a "contradicted". A
one-seed claim with no measured band reads **seed noise not measured**
(``unmeasured`` gives why); it is neither holds nor contradicted.

Set aside before any test: **not applicable** (the premise fails in this run;
``not_applicable`` gives the reason) and **not testable** (an arm it rests on
did not learn its task, :func:`learned_floor`; or its interval has zero width:
every resample gave the same effect, which is no evidence either way).

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
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt
from scipy.stats import norm
from scipy.stats import t as student_t

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.stats import CORRECTIONS, Correction, adjust_p
from polymnesia.metrics.uncertainty import Interval, PairedTest
from polymnesia.reports.table_core import Estimate, Table, to_markdown

Verdict = Literal[
    "holds",
    "contradicted",
    "inconclusive",
    "seed noise not measured",
    "not applicable",
    "not testable",
]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)
#: verdicts of a claim that was tested
TESTED: tuple[Verdict, ...] = ("holds", "contradicted", "inconclusive")
Kind = Literal["paper", "extension", "precondition"]
KINDS: tuple[Kind, ...] = ("paper", "extension", "precondition")
Design = Literal["superiority", "non-inferiority", "equivalence", "correlation"]
DESIGNS: tuple[Design, ...] = ("superiority", "non-inferiority", "equivalence", "correlation")
ALPHA = 0.05
#: the multiplicity correction every claims block applies (metrics/stats.py)
CORRECTION: Correction = "holm"
#: what a one-seed claim without a measured seed-noise band says
UNMEASURED = "one seed, seed noise not measured"
#: how to measure the band (docs/reports.md, "Seed noise")
MEASURE_HINT = "run the config with `seeds: [0, 1, 2]` to measure it"
#: why a claim with a zero-width interval is not testable
ZERO_WIDTH = (
    "zero-width interval: every resample gave the same effect, which is no evidence either way"
)


def _finite_df(df: float | None) -> bool:
    return df is not None and math.isfinite(df) and df > 0


def quantile(level: float, df: float | None = None) -> float:
    """The two-sided quantile of a ``level`` interval: Student t at ``df``, normal when ``df``
    is None or infinite."""
    q = (1 + level) / 2
    return float(student_t.ppf(q, df)) if _finite_df(df) else float(norm.ppf(q))


def two_sided_p(z: float, df: float | None = None) -> float:
    """The two-sided p of a statistic ``z`` (effect over its standard error): Student t at
    ``df``, normal when ``df`` is None or infinite."""
    tail = student_t.sf(abs(z), df) if _finite_df(df) else norm.sf(abs(z))
    return float(min(1.0, 2 * tail))


def _one_sided_p(z: float, df: float | None) -> float:
    return float(student_t.sf(z, df) if _finite_df(df) else norm.sf(z))


@dataclass(frozen=True)
class SeedNoise:
    """How far one claim's effect moves with the training seed alone: the sample standard
    deviation ``sd`` of its effect over ``seeds`` (training seeds of the same config at the
    same size, never the seed being judged), with ``len(seeds) - 1`` degrees of freedom;
    ``source`` names the record it comes from (config, commit)."""

    sd: float
    seeds: tuple[int, ...]
    source: str = ""

    def __post_init__(self) -> None:
        if len(self.seeds) < 2 or not (math.isfinite(self.sd) and self.sd >= 0):
            raise PolymnesiaError(
                f"a seed-noise band needs a standard deviation >= 0 over at least 2 seeds; got "
                f"sd {self.sd} over seeds {list(self.seeds)}"
            )

    @property
    def n_seeds(self) -> int:
        return len(self.seeds)

    @property
    def df(self) -> int:
        return len(self.seeds) - 1

    def text(self, fmt: str = ".3f") -> str:
        """ "seed sd 0.012 (2 seeds: 1, 2; df 1)"."""
        seeds = ", ".join(str(s) for s in self.seeds)
        return f"seed sd {format(self.sd, fmt)} ({self.n_seeds} seeds: {seeds}; df {self.df})"


def judge(
    expected_sign: int,
    effect: float,
    low: float,
    high: float,
    p_value: float | None = None,
    *,
    margin: float | None = None,
    p_adjusted: float | None = None,
    design: Design | None = None,
) -> Verdict:
    """The verdict of an effect whose paper sign is ``expected_sign`` (+1 or -1).

    Superiority and correlation (``margin`` None): is the effect on the paper's side of zero?
    Non-inferiority: is it on the paper's side of ``-expected_sign * margin`` (not worse than
    the margin)? Equivalence: does the interval lie within ``(-margin, margin)`` (holds) or
    wholly outside it (contradicted)? With ``p_adjusted`` (a multiplicity-corrected p of the
    same test) the effect must also pass ``p_adjusted < ALPHA``.
    """
    if expected_sign not in (1, -1):
        raise PolymnesiaError(f"expected_sign must be +1 or -1, got {expected_sign}")
    if margin is not None and not (math.isfinite(margin) and margin >= 0):
        raise PolymnesiaError(f"a margin must be a number >= 0, got {margin}")
    design = design or ("non-inferiority" if margin is not None else "superiority")
    if design not in DESIGNS:
        raise PolymnesiaError(f"unknown claim design '{design}'; accepted: {', '.join(DESIGNS)}")
    if design in ("non-inferiority", "equivalence") and margin is None:
        raise PolymnesiaError(f"a {design} claim needs a margin")
    finite = math.isfinite(low) and math.isfinite(high)
    passes = p_adjusted is None or not math.isfinite(p_adjusted) or p_adjusted < ALPHA
    if design == "equivalence":
        assert margin is not None
        if finite:
            inside, outside = -margin < low and high < margin, low > margin or high < -margin
        else:
            inside = p_value is not None and math.isfinite(p_value) and p_value < ALPHA
            outside = False
        if inside and passes:
            return "holds"
        return "contradicted" if outside else "inconclusive"
    bound = -expected_sign * margin if margin is not None else 0.0
    d = effect - bound
    if finite:
        significant = low > bound or high < bound
    else:
        significant = p_value is not None and math.isfinite(p_value) and p_value < ALPHA
    significant = significant and passes
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


def format_df(df: float | None) -> str:
    """ "2.2", "14" or "∞" (a normal or bootstrap interval)."""
    if not _finite_df(df):
        return "∞"
    assert df is not None
    return f"{df:.0f}" if abs(df - round(df)) < 1e-9 else f"{df:.1f}"


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
        item_term = se_i**4 / self.df if self.df is not None and _finite_df(self.df) else 0.0
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
                _one_sided_p((self.effect + self.margin) / se, df),
                _one_sided_p((self.margin - self.effect) / se, df),
            )
            return float(min(1.0, 2 * worst))
        bound = -self.expected_sign * self.margin if self.margin is not None else 0.0
        d = self.effect - bound
        if se <= 0:
            return 1.0 if d == 0 else 0.0
        return two_sided_p(d / se, df)

    def evidence(self, fmt: str = ".3f") -> str:
        """ "+0.042 [+0.010, +0.075]" (or the effect alone when there is no interval), then the
        interval with seed noise and its band, then the margin where there is one."""
        eff = format(self.effect, "+" + fmt)
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
        badge = _BADGE[self.verdict]
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

_BADGE = {
    "holds": "✔ holds",
    "contradicted": "✘ contradicted",
    "inconclusive": "? inconclusive",
    "seed noise not measured": "≈ seed noise not measured",
    "not applicable": "– not applicable",
    "not testable": "⊘ not testable",
}

#: the blocks of a claims section, in order: (kind, heading above the block, statement column)
BLOCKS: tuple[tuple[Kind, str, str], ...] = (
    ("paper", "", "Claim (paper)"),
    (
        "extension",
        "Extensions: comparisons the paper does not make, judged as a family of their own",
        "Claim (extension)",
    ),
    (
        "precondition",
        "Setup checks: preconditions of the claims, left out of the counts and the correction",
        "Check (setup)",
    ),
)


def _corrected(claims: Sequence[Claim]) -> list[Claim]:
    """The claims after the block's multiplicity correction (kept if already applied)."""
    if any(c.correction for c in claims):
        return list(claims)
    return correct(claims)


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def _tally(claims: Sequence[Claim]) -> tuple[int, Counter[str]]:
    counts: Counter[str] = Counter(c.verdict for c in claims)
    return sum(counts[v] for v in TESTED), counts


def verdict_summary(claims: Sequence[Claim]) -> str:
    """ "k of the paper's m claims were testable at this scale; of those, h hold, c are
    contradicted, i are inconclusive.", then the claims set aside, the extensions, the setup
    checks, the rule and the correction."""
    if not claims:
        return "No claim could be checked in this run."
    claims = _corrected(claims)
    paper = [c for c in claims if c.kind == "paper"]
    k, counts = _tally(paper)
    h = counts["holds"]
    text = (
        f"{k} of the paper's {len(paper)} claim{_plural(len(paper), ' was', 's were')} testable "
        f"at this scale; of those, {h} {_plural(h, 'holds', 'hold')}, "
        f"{counts['contradicted']} {_plural(counts['contradicted'], 'is', 'are')} contradicted, "
        f"{counts['inconclusive']} {_plural(counts['inconclusive'], 'is', 'are')} inconclusive."
    )
    aside = [f"{counts[v]} {v}" for v in ("not applicable", "not testable") if counts[v]]
    if counts["seed noise not measured"]:
        aside.append(f"{counts['seed noise not measured']} {UNMEASURED} ({MEASURE_HINT})")
    if aside:
        text += " Not tested: " + ", ".join(aside) + "."
    ext = [c for c in claims if c.kind == "extension"]
    if ext:
        ke, ce = _tally(ext)
        text += (
            f" Extensions (comparisons the paper does not make, a family of their own): {ke} of "
            f"{len(ext)} testable; {ce['holds']} {_plural(ce['holds'], 'holds', 'hold')}, "
            f"{ce['contradicted']} contradicted, {ce['inconclusive']} inconclusive."
        )
    pre = [c for c in claims if c.kind == "precondition"]
    if pre:
        passed = sum(1 for c in pre if c.verdict == "holds")
        text += (
            f" Setup checks (preconditions, outside the counts and the correction): {passed} of "
            f"{len(pre)} pass."
        )
    text += (
        " Holds / contradicted: the effect's interval excludes the boundary (zero or a "
        f"non-inferiority margin) and the adjusted p is below {ALPHA:g}; inconclusive: not both."
    )
    if any(c.noise is not None and c.testable for c in claims):
        text += (
            " One training seed: each interval is widened by the config's own seed noise (the "
            "standard deviation of the effect over other seeds of the same config, Student t), "
            "so the band can make a claim inconclusive whichever way it points."
        )
    families = [
        (kind, sum(1 for c in claims if c.kind == kind and c.correction))
        for kind in ("paper", "extension")
    ]
    method = next((c.correction for c in claims if c.correction), CORRECTION)
    shown = [
        f"the {n} tested {'paper' if kind == 'paper' else 'extension'} claim{_plural(n, '', 's')}"
        for kind, n in families
        if n
    ]
    if shown:
        text += (
            f" p: each test's own, from the distribution of its interval; adjusted p: "
            f"{CORRECTIONS[method]} within each family ({' and, apart, '.join(shown)})."
        )
    return text


def _label(method: str) -> str:
    return {"holm": "Holm", "benjamini-hochberg": "BH"}[method]


def _test_text(c: Claim) -> str:
    return f"{c.test_design}; {c.test}" + (f"; {c.source}" if c.source else "")


def claims_table(claims: Sequence[Claim], fmt: str = ".3f") -> Table:
    """Every claim as one :class:`Table` (written as ``claims.csv``), after the correction:
    its id, kind, statement, verdict, effect and interval, the raw and the adjusted p, the
    interval's df, the design, the seed-noise band used, n and the test."""
    claims = _corrected(claims)
    rows = [
        [
            i + 1,
            c.id,
            c.kind,
            c.statement,
            c.verdict_text(),
            (c.effect_label + ": " if c.effect_label else "") + c.evidence(fmt),
            c.paper,
            "" if c.headroom_share() is None else f"{100 * (c.headroom_share() or 0):+.0f}%",
            c.shown_p(),
            c.shown_p_adjusted(),
            format_df(c.judged()[2]),
            c.test_design,
            c.noise.text(fmt) if c.noise is not None else (c.unmeasured or ""),
            c.n,
            c.test + (f"; {c.source}" if c.source else ""),
        ]
        for i, c in enumerate(claims)
    ]
    level = f"{round(100 * claims[0].level)}%" if claims else "95%"
    method = next((c.correction for c in claims if c.correction), CORRECTION)
    return Table(
        name="claims",
        title="",
        columns=[
            "#",
            "id",
            "Kind",
            "Claim (paper)",
            "Verdict",
            f"Effect [{level} CI]",
            "Paper",
            "Headroom share",
            "p",
            f"p ({_label(method)})",
            "df",
            "Design",
            "Seed noise",
            "n",
            "Test",
        ],
        rows=rows,
    )


def _display_table(
    numbered: Sequence[tuple[int, Claim]], head: str, fmt: str, method: str, level: str
) -> Table:
    rows = [
        [
            i,
            c.statement,
            c.verdict_text(),
            (c.effect_label + ": " if c.effect_label else "")
            + c.evidence(fmt)
            + (f"; {c.context()}" if c.context() else ""),
            c.shown_p(),
            c.shown_p_adjusted(),
            c.n,
            _test_text(c),
        ]
        for i, c in numbered
    ]
    columns = [
        "#",
        head,
        "Verdict",
        f"Effect [{level} CI]",
        "p",
        f"p ({_label(method)})",
        "n",
        "Test",
    ]
    return Table(name="claims", title="", columns=columns, rows=rows)


def claims_block_table(
    claims: Sequence[Claim], head: str = "Claim (paper)", fmt: str = ".3f"
) -> Table:
    """The claims as displayed in a report (numbered from 1, the raw and the adjusted p, the
    design in the test column), with ``head`` over the statements; the claims are shown as
    they are (correct them first where a family applies)."""
    level = f"{round(100 * claims[0].level)}%" if claims else "95%"
    method = next((c.correction for c in claims if c.correction), CORRECTION)
    return _display_table(list(enumerate(claims, 1)), head, fmt, method, level)


def _blocks(claims: Sequence[Claim]) -> list[tuple[str, list[tuple[int, Claim]], str]]:
    """``(heading, [(number, claim)], statement column)`` per non-empty block, numbered in
    the order shown."""
    out, n = [], 0
    for kind, heading, head in BLOCKS:
        mine = [c for c in claims if c.kind == kind]
        if mine:
            out.append((heading, [(n + j + 1, c) for j, c in enumerate(mine)], head))
            n += len(mine)
    return out


def claims_markdown(claims: Sequence[Claim], fmt: str = ".3f") -> str:
    """A Markdown block: the verdict summary, then the paper's claims, the extensions and the
    setup checks, one table each."""
    claims = _corrected(claims)
    level = f"{round(100 * claims[0].level)}%" if claims else "95%"
    method = next((c.correction for c in claims if c.correction), CORRECTION)
    parts = [verdict_summary(claims)]
    for heading, numbered, head in _blocks(claims):
        if heading:
            parts.append(f"{heading}:")
        parts.append(to_markdown(_display_table(numbered, head, fmt, method, level), fmt))
    return "\n\n".join(parts)


def _arrows(text: str) -> str:
    """Escaped text whose "->" never breaks across lines."""
    return text.replace("-&gt;", '<span class="nw">-&gt;</span>')


def claims_html(claims: Sequence[Claim], fmt: str = ".3f") -> str:
    """An HTML block: the summary and, per block (paper, extensions, setup checks), a table
    with a coloured verdict per claim. Laid out to fit a laptop window: fixed column shares,
    the effect's label above its numbers, long test descriptions wrapped (docs/reports.md,
    "The HTML report")."""
    claims = _corrected(claims)
    level = f"{round(100 * claims[0].level)}%" if claims else "95%"
    method = next((c.correction for c in claims if c.correction), CORRECTION)
    tables = []
    for heading, numbered, head in _blocks(claims):
        rows = []
        for i, c in numbered:
            label = (
                f'<span class="label">{html.escape(c.effect_label)}</span> '
                if c.effect_label
                else ""
            )
            shown = html.escape(replace(c, margin=None, noise=None).evidence(fmt))
            effect = label + f'<span class="num">{shown}</span>'
            if c.noise is not None:  # the interval with seed noise, then the band: own lines
                low, high, df = c.judged()
                if math.isfinite(low) and math.isfinite(high):
                    wide = f"[{format(low, '+' + fmt)}, {format(high, '+' + fmt)}]"
                    effect += (
                        f' <span class="margin">with seed noise <span class="nw">{wide}</span>, '
                        f"df {format_df(df)}</span>"
                    )
            if c.margin is not None:
                bound = (
                    f"±{format(c.margin, fmt)}"
                    if c.test_design == "equivalence"
                    else format(-c.expected_sign * c.margin, "+" + fmt)
                )
                effect += f' <span class="margin">{c.test_design} margin {bound}</span>'
            if c.context():
                effect += f' <span class="margin">{html.escape(c.context())}</span>'
            test = html.escape(f"{c.test_design}; {c.test}") + (
                f'<span class="source">{html.escape(c.source)}</span>' if c.source else ""
            )
            badge = html.escape(_BADGE[c.verdict])
            why = f'<span class="why">{_arrows(html.escape(c.reason))}</span>' if c.reason else ""
            band = (  # what the verdict was judged with, under it
                f'<span class="why">{html.escape(c.noise.text(fmt))}</span>'
                if c.noise is not None
                else ""
            )
            rows.append(
                f'<tr class="claim {c.verdict.replace(" ", "-")}"><td>{i}</td>'
                f"<td>{_arrows(html.escape(c.statement))}{why}</td>"
                f'<td class="verdict"><span class="badge">{badge}</span>{band}</td>'
                f'<td class="effect">{effect}</td><td class="p">{html.escape(c.shown_p())}</td>'
                f'<td class="p">{html.escape(c.shown_p_adjusted())}</td>'
                f'<td class="n">{c.n}</td><td class="test">{test}</td></tr>'
            )
        columns = _display_table([], head, fmt, method, level).columns
        cols = "".join(f'<col class="c{i}">' for i in range(len(columns)))
        th = "".join(f"<th>{html.escape(h)}</th>" for h in columns)
        caption = f'<p class="block">{html.escape(heading)}</p>\n' if heading else ""
        tables.append(
            f'{caption}<div class="table-wrap"><table class="claims-table"><colgroup>{cols}'
            f"</colgroup>\n<thead><tr>{th}</tr></thead>\n<tbody>\n"
            + "\n".join(rows)
            + "\n</tbody>\n</table></div>"
        )
    return (
        f'<div class="claims"><p>{html.escape(verdict_summary(claims))}</p>\n'
        + "\n".join(tables)
        + "</div>"
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

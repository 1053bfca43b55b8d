"""The verdicts a claim can get and the rule that gives them (:func:`judge`): the sign of
an effect against its boundary (zero, or a margin), its interval at the claim's level and
its p, widened by a measured seed-noise band on one-seed runs (:class:`SeedNoise`).
p-values are read off the same Student t (or normal) distribution as the interval
(:func:`two_sided_p`), and printed by :func:`format_p`. The claim that carries them is
:class:`polymnesia.reports.claims.Claim`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
from scipy.stats import norm
from scipy.stats import t as student_t

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.stats import Correction

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


def finite_df(df: float | None) -> bool:
    return df is not None and math.isfinite(df) and df > 0


def quantile(level: float, df: float | None = None) -> float:
    """The two-sided quantile of a ``level`` interval: Student t at ``df``, normal when ``df``
    is None or infinite."""
    q = (1 + level) / 2
    return float(student_t.ppf(q, df)) if finite_df(df) else float(norm.ppf(q))


def two_sided_p(z: float, df: float | None = None) -> float:
    """The two-sided p of a statistic ``z`` (effect over its standard error): Student t at
    ``df``, normal when ``df`` is None or infinite."""
    tail = student_t.sf(abs(z), df) if finite_df(df) else norm.sf(abs(z))
    return float(min(1.0, 2 * tail))


def one_sided_p(z: float, df: float | None) -> float:
    return float(student_t.sf(z, df) if finite_df(df) else norm.sf(z))


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
    if not finite_df(df):
        return "∞"
    assert df is not None
    return f"{df:.0f}" if abs(df - round(df)) < 1e-9 else f"{df:.1f}"


#: each verdict's mark, as the claims table prints it
BADGE = {
    "holds": "✔ holds",
    "contradicted": "✘ contradicted",
    "inconclusive": "? inconclusive",
    "seed noise not measured": "≈ seed noise not measured",
    "not applicable": "– not applicable",
    "not testable": "⊘ not testable",
}

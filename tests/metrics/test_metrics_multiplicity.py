"""Multiplicity corrections (metrics/stats.py) against golden values of R's ``p.adjust``."""

from __future__ import annotations

import math

import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.stats import adjust_p, benjamini_hochberg, holm

NAN = float("nan")
# R 4.x: p <- c(0.01, 0.04, 0.03, 0.005, 0.5)
#   p.adjust(p, "holm") -> 0.040 0.090 0.090 0.025 0.500
#   p.adjust(p, "BH")   -> 0.025 0.050 0.050 0.025 0.500
P = [0.01, 0.04, 0.03, 0.005, 0.5]
HOLM = [0.04, 0.09, 0.09, 0.025, 0.5]
BH = [0.025, 0.05, 0.05, 0.025, 0.5]


def _same(got: list[float], want: list[float]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert (math.isnan(g) and math.isnan(w)) or g == pytest.approx(w, abs=1e-12), (got, want)


def test_holm_golden() -> None:
    _same(holm(P), HOLM)
    _same(adjust_p(P, "holm"), HOLM)


def test_benjamini_hochberg_golden() -> None:
    _same(benjamini_hochberg(P), BH)
    _same(adjust_p(P, "benjamini-hochberg"), BH)


def test_missing_p_values_stay_out_of_the_family() -> None:
    # the family is the 5 finite p-values: the same adjustments, NaN where no p was given
    _same(holm([*P[:2], None, *P[2:], NAN]), [*HOLM[:2], NAN, *HOLM[2:], NAN])
    _same(benjamini_hochberg([None, *P]), [NAN, *BH])
    assert holm([]) == []
    _same(holm([None]), [NAN])


def test_capped_at_one_and_monotone() -> None:
    # p.adjust(c(0.6, 0.6, 0.01), "holm") -> 1 1 0.03; "BH" -> 0.6 0.6 0.03
    _same(holm([0.6, 0.6, 0.01]), [1.0, 1.0, 0.03])
    _same(benjamini_hochberg([0.6, 0.6, 0.01]), [0.6, 0.6, 0.03])
    # p.adjust(c(0.3, 0.4), "holm") -> 0.6 0.6; "BH" -> 0.4 0.4
    _same(holm([0.3, 0.4]), [0.6, 0.6])
    _same(benjamini_hochberg([0.3, 0.4]), [0.4, 0.4])
    # one test: nothing to correct
    _same(holm([0.02]), [0.02])
    _same(benjamini_hochberg([0.0]), [0.0])


def test_refusals() -> None:
    with pytest.raises(PolymnesiaError, match="p-values must lie in"):
        holm([0.1, 1.5])
    with pytest.raises(PolymnesiaError, match="unknown correction"):
        adjust_p([0.1], "bonferroni")  # type: ignore[arg-type]

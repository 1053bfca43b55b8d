"""Three-way verdicts, claim rendering, chance and majority-class baselines (hand-checked)."""

from __future__ import annotations

import math

import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.uncertainty import Interval, PairedTest
from polymnesia.reports.claims import (
    Claim,
    baseline_claim,
    baseline_table,
    claim_from_interval,
    claim_from_test,
    claims_html,
    claims_markdown,
    judge,
    label_baselines,
    verdict_summary,
)
from polymnesia.reports.table_core import to_markdown

NAN = math.nan


def test_judge_three_ways() -> None:
    assert judge(+1, 0.05, 0.01, 0.09) == "holds"
    assert judge(-1, 0.05, 0.01, 0.09) == "contradicted"
    assert judge(+1, 0.05, -0.01, 0.09) == "inconclusive"  # the interval contains zero
    assert judge(-1, -0.2, -0.3, -0.1) == "holds"
    assert judge(+1, 0.3, NAN, NAN) == "inconclusive"  # one seed, no items: nothing to judge
    assert judge(+1, 0.3, NAN, NAN, p_value=0.01) == "holds"  # a permutation test's p stands in
    assert judge(+1, -0.3, NAN, NAN, p_value=0.01) == "contradicted"
    assert judge(+1, 0.3, NAN, NAN, p_value=0.2) == "inconclusive"
    with pytest.raises(PolymnesiaError, match="expected_sign"):
        judge(0, 1.0, 0.5, 1.5)


def test_claims_from_tests_and_intervals() -> None:
    t = PairedTest(
        -0.04, -0.07, -0.01, 0.004, 1200, "paired bootstrap over 1200 items (1000 resamples)"
    )
    c = claim_from_test("AFA has lower bits per byte than BA", -1, t, effect_label="AFA − BA")
    assert (c.verdict, c.n, c.test) == ("holds", 1200, t.method)
    assert c.evidence() == "-0.040 [-0.070, -0.010], p = 0.004"
    b = claim_from_interval("above majority", +1, Interval(0.30, 0.26, 0.34, 400), reference=0.22)
    assert (b.effect, b.low, b.high) == pytest.approx((0.08, 0.04, 0.12)) and b.verdict == "holds"


def test_claims_markdown_and_html() -> None:
    claims = [
        Claim(
            "A beats B", +1, 0.1, 0.05, 0.15, 300, "paired bootstrap", source="paper 003, Table 1"
        ),
        Claim("C beats D", +1, -0.1, -0.15, -0.05, 300, "paired bootstrap"),
        Claim("E beats F", +1, 0.01, -0.02, 0.04, 300, "paired bootstrap"),
    ]
    assert verdict_summary(claims).startswith("1 of 3 claims holds, 1 contradicted, 1 inconclusive")
    md = claims_markdown(claims).splitlines()
    assert md[2] == "| # | Claim (paper) | Verdict | Effect [95% CI] | n | Test |"
    assert (
        md[4]
        == "| 1 | A beats B | ✔ holds | +0.100 [+0.050, +0.150] | 300 | paired bootstrap; paper 003, Table 1 |"
    )
    html = claims_html(claims)
    assert html.count('<tr class="claim ') == 3 and 'class="claim contradicted"' in html
    assert "<script" not in html and "A beats B" in html


def test_label_baselines_by_hand() -> None:
    # 10 labels of 3 classes: shares 0.5, 0.3, 0.2
    b = label_baselines([0] * 5 + [1] * 3 + [2] * 2, n_labels=3)
    assert (b.n, b.n_labels, b.majority_label) == (10, 3, 0)
    assert b.chance("accuracy") == pytest.approx(1 / 3) and b.majority("accuracy") == 0.5
    assert b.majority("macro_f1") == pytest.approx(
        2 * 0.5 / 1.5 / 3
    )  # F1 of the majority class / k
    want = sum(2 * p / 3 / (p + 1 / 3) for p in (0.5, 0.3, 0.2)) / 3
    assert b.chance("macro_f1") == pytest.approx(want)
    with pytest.raises(PolymnesiaError, match="no baseline"):
        b.chance("bleu")
    with pytest.raises(PolymnesiaError, match="0..1"):
        label_baselines([0, 2], n_labels=2)


def test_baseline_claim_and_table() -> None:
    base = label_baselines([0] * 6 + [1] * 4)  # majority 0.6
    good = Interval(0.8, 0.72, 0.88, 10)
    assert baseline_claim("SLF", "en", "accuracy", good, base).verdict == "holds"
    meh = Interval(0.62, 0.5, 0.74, 10)
    t = baseline_table(
        [("SLF", "en", "accuracy", good, base), ("Uniform", "fr", "accuracy", meh, base)]
    )
    lines = to_markdown(t).splitlines()
    assert (
        lines[2]
        == "| SLF | en | accuracy | 0.800 ± 0.080 | 0.500 | 0.600 | 1.333 | above majority | 10 |"
    )
    assert lines[3].endswith("| not distinguishable | 10 |")

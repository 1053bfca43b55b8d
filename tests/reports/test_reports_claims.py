"""Three-way verdicts, claim rendering, chance and majority-class baselines (hand-checked)."""

from __future__ import annotations

import math
from dataclasses import replace

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
    claims_table,
    correct,
    format_p,
    judge,
    label_baselines,
    learned,
    learned_floor,
    not_applicable,
    not_testable,
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
    assert c.evidence() == "-0.040 [-0.070, -0.010]" and c.shown_p() == "0.004"
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
    assert md[2] == "| # | Claim (paper) | Verdict | Effect [95% CI] | p (Holm) | n | Test |"
    assert (
        md[4] == "| 1 | A beats B | ✔ holds | +0.100 [+0.050, +0.150] | < 0.001 | 300 | "
        "paired bootstrap; paper 003, Table 1 |"
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
        lines[2] == "| SLF | en | accuracy | 0.800 ± 0.080 | 0.500 | 0.600 | 1.333 | learned | 10 |"
    )  # binary, majority 0.6: the floor is halfway to 1, 0.8
    assert lines[3].endswith("| did not learn | 10 |")


def test_small_p_values_print_as_below_0001_never_zero() -> None:
    c = claim_from_test("A beats B", +1, PairedTest(0.2, 0.1, 0.3, 0.0, 500, "paired bootstrap"))
    assert c.shown_p() == "< 0.001" and format_p(0.0004) == "< 0.001"
    assert format_p(0.001) == "0.001" and format_p(0.0412) == "0.041" and format_p(None) == "–"
    text = claims_markdown([c]) + claims_html([c])
    assert "< 0.001" in text or "&lt; 0.001" in text
    assert "p = 0" not in text and "| 0.000 |" not in text


def test_non_inferiority_is_judged_against_its_margin() -> None:
    keeps = Claim("P2 keeps EA", +1, -0.010, -0.057, 0.037, 300, "paired bootstrap", 0.7)
    assert keeps.verdict == "inconclusive"  # as a superiority test: the interval holds zero
    ni = replace(keeps, margin=0.1)
    assert ni.verdict == "holds"  # the whole interval lies above -0.1
    assert ni.evidence() == "-0.010 [-0.057, +0.037]; margin -0.100"
    assert replace(keeps, margin=0.05).verdict == "inconclusive"  # -0.057 is past -0.05
    lost = Claim("P2 keeps EA", +1, -0.30, -0.35, -0.25, 300, "paired bootstrap", 0.0, margin=0.05)
    assert lost.verdict == "contradicted"  # worse than the margin, all of it
    # the sign flips the boundary: "no higher than +margin"
    assert judge(-1, 0.02, -0.01, 0.04, margin=0.05) == "holds"
    # the p-value of the margin test: below 0.05 exactly where the interval excludes it
    assert ni.test_p() is not None and ni.test_p() < 0.05
    assert replace(keeps, margin=0.05).test_p() > 0.05
    md = claims_markdown([ni])
    assert "margin -0.100" in md
    with pytest.raises(PolymnesiaError, match="margin"):
        judge(+1, 0.1, 0.0, 0.2, margin=-1.0)


def test_holm_correction_over_the_claims_block() -> None:
    # each interval excludes zero; raw p 0.01, 0.04, 0.03 -> Holm 0.03, 0.06, 0.06
    claims = [
        Claim("A", +1, 0.3, 0.1, 0.5, 100, "t", 0.01),
        Claim("B", +1, 0.2, 0.01, 0.4, 100, "t", 0.04),
        Claim("C", -1, 0.2, 0.02, 0.4, 100, "t", 0.03),
        Claim("D", +1, 0.9, 0.8, 1.0, 100, "t", 0.0001, not_applicable="premise absent"),
    ]
    assert [c.verdict for c in claims[:3]] == ["holds", "holds", "contradicted"]  # uncorrected
    fixed = correct(claims)
    assert [c.p_adjusted for c in fixed[:3]] == pytest.approx([0.03, 0.06, 0.06])
    assert fixed[3].p_adjusted is None  # set aside: not in the family
    assert [c.verdict for c in fixed] == ["holds", "inconclusive", "inconclusive", "not applicable"]
    assert correct(fixed) == fixed  # idempotent
    summary = verdict_summary(claims)
    assert summary.startswith(
        "1 of 4 claims holds, 0 contradicted, 2 inconclusive, 1 not applicable"
    )
    assert "Holm" in summary and "over the 3 tested claims" in summary
    rows = claims_table(claims).rows
    assert [r[4] for r in rows] == ["0.030", "0.060", "0.060", "–"]
    assert rows[3][2] == "– not applicable: premise absent"


def test_claims_on_an_arm_that_did_not_learn_are_not_testable() -> None:
    # 21 balanced classes: macro-F1 chance ~ 1/21 ... a floor of twice the larger baseline
    base = label_baselines(list(range(11)) * 10, n_labels=11)
    floor = learned_floor(base, "macro_f1")
    assert floor == pytest.approx(2 * max(base.chance("macro_f1"), base.majority("macro_f1")))
    assert not learned(0.097, base, "macro_f1") and learned(floor + 1e-9, base, "macro_f1")
    assert not learned(float("nan"), base, "macro_f1")
    c = not_testable(
        Claim("r=11 forgets more", -1, -0.1, -0.2, -0.05, 50, "t", 0.001), ["SHARED LoRA r = 11"]
    )
    assert c.verdict == "not testable" and not c.testable
    assert c.verdict_text() == "⊘ not testable: arm SHARED LoRA r = 11 did not learn"
    assert not_testable(c, []) is c
    html = claims_html([c])
    assert 'class="claim not-testable"' in html and "did not learn" in html
    # binary accuracy: twice chance is a perfect score, so the floor is halfway to 1
    assert learned_floor(label_baselines([0, 1] * 5), "accuracy") == pytest.approx(0.75)
    assert not_applicable(c, "x").reason == "arm SHARED LoRA r = 11 did not learn"

"""Three-way verdicts, claim rendering, chance and majority-class baselines (hand-checked)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from scipy.stats import norm
from scipy.stats import t as student_t

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.uncertainty import Interval, PairedTest
from polymnesia.reports.baselines import (
    baseline_claim,
    baseline_table,
    label_baselines,
    learned,
    learned_floor,
)
from polymnesia.reports.claims import (
    Claim,
    claim_from_interval,
    claim_from_test,
    correct,
    not_applicable,
    not_testable,
    slug,
    with_premises,
)
from polymnesia.reports.claims_table import (
    claims_html,
    claims_markdown,
    claims_table,
    verdict_summary,
)
from polymnesia.reports.table_core import to_markdown
from polymnesia.reports.verdicts import (
    UNMEASURED,
    ZERO_WIDTH,
    SeedNoise,
    format_df,
    format_p,
    judge,
    quantile,
    two_sided_p,
)

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
            "A beats B",
            +1,
            0.1,
            0.05,
            0.15,
            300,
            "paired bootstrap",
            source="Mao et al. 2022, Table 1",
        ),
        Claim("C beats D", +1, -0.1, -0.15, -0.05, 300, "paired bootstrap"),
        Claim("E beats F", +1, 0.01, -0.02, 0.04, 300, "paired bootstrap"),
    ]
    assert verdict_summary(claims).startswith(
        "3 of the paper's 3 claims were testable at this scale; of those, 1 holds, "
        "1 is contradicted, 1 is inconclusive."
    )
    md = claims_markdown(claims).splitlines()
    assert md[2] == "| # | Claim (paper) | Verdict | Effect [95% CI] | p | p (Holm) | n | Test |"
    assert (
        md[4] == "| 1 | A beats B | ✔ holds | +0.100 [+0.050, +0.150] | < 0.001 | < 0.001 | 300 | "
        "superiority; paired bootstrap; Mao et al. 2022, Table 1 |"
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
    assert ni.test_design == "non-inferiority" and keeps.test_design == "superiority"
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
        "3 of the paper's 4 claims were testable at this scale; of those, 1 holds, "
        "0 are contradicted, 2 are inconclusive. Not tested: 1 not applicable."
    )
    assert "Holm" in summary and "(the 3 tested paper claims)" in summary
    table = claims_table(claims)
    raw, adj = table.columns.index("p"), table.columns.index("p (Holm)")
    assert [r[raw] for r in table.rows] == ["0.010", "0.040", "0.030", "–"]  # both shown
    assert [r[adj] for r in table.rows] == ["0.030", "0.060", "0.060", "–"]
    assert table.rows[3][table.columns.index("Verdict")] == "– not applicable: premise absent"


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


def test_a_margin_claims_p_comes_from_the_t_distribution_of_its_interval() -> None:
    """Issue 44: a t-interval on 2.2 df gives p 0.022, not the normal approximation's 0.003."""
    df = 2.2
    se = 0.01
    half = float(student_t.ppf(0.975, df)) * se
    effect = -0.05 + 4.0 * se  # 4 standard errors above the -0.05 margin
    c = Claim("keeps", +1, effect, effect - half, effect + half, 3, "t over seeds", margin=0.05)
    tc = replace(c, df=df)
    assert tc.test_p() == pytest.approx(2 * student_t.sf(4.0, df))  # 0.05 on 2.2 df
    assert c.test_p() == pytest.approx(2 * norm.sf(abs(effect + 0.05) / (half / norm.ppf(0.975))))
    assert tc.test_p() > c.test_p()  # the heavier tail of t
    # the p of a t-interval is below 0.05 exactly where the interval excludes the boundary
    edge = replace(tc, effect=-0.05 + half, low=-0.05, high=-0.05 + 2 * half)
    assert edge.test_p() == pytest.approx(0.05)
    assert two_sided_p(2.0) == pytest.approx(2 * norm.sf(2.0))  # no df: normal
    assert quantile(0.95, 2.2) == pytest.approx(student_t.ppf(0.975, 2.2))
    assert format_df(2.2) == "2.2" and format_df(None) == "∞" and format_df(14.0) == "14"
    # the df of the evidence reaches the claim
    test = PairedTest(0.1, 0.05, 0.15, 0.01, 6, "t over seeds", df=2.2)
    assert claim_from_test("x", +1, test).df == 2.2
    assert claim_from_interval("x", +1, Interval(0.3, 0.2, 0.4, 3, df=2.0)).df == 2.0


def test_seed_noise_widens_the_interval_on_both_sides() -> None:
    """A one-seed claim is judged on sqrt(se_item² + sd_seed²) with t at the Welch df: the band
    turns a "holds" into inconclusive exactly as it does a "contradicted"."""
    noise = SeedNoise(0.05, (1, 2))
    assert noise.df == 1 and noise.n_seeds == 2
    z = norm.ppf(0.975)
    holds = Claim("A beats B", +1, 0.03, 0.03 - 0.01 * z, 0.03 + 0.01 * z, 300, "bootstrap", 0.003)
    assert holds.verdict == "holds"
    banded = replace(holds, noise=noise)
    low, high, df = banded.judged()
    se = math.sqrt(0.01**2 + 0.05**2)
    assert df == pytest.approx(se**4 / (0.05**4 / 1))  # the item term has infinite df
    assert (low, high) == pytest.approx(
        (0.03 - student_t.ppf(0.975, df) * se, 0.03 + (student_t.ppf(0.975, df) * se))
    )
    assert banded.verdict == "inconclusive"
    contra = replace(banded, expected_sign=-1)
    assert replace(contra, noise=None).verdict == "contradicted"
    assert contra.verdict == "inconclusive"  # symmetric
    # the p reads the widened interval, not the item test's own p
    assert banded.test_p() == pytest.approx(two_sided_p(0.03 / se, df))
    # an effect far beyond the band still holds
    far = replace(banded, effect=5.0, low=4.98, high=5.02)
    assert far.verdict == "holds"
    assert "with seed noise [" in banded.evidence() and "seed sd 0.050 (2 seeds: 1, 2; df 1)" in (
        banded.evidence()
    )
    # a band of zero spread leaves the item interval as it is
    zero = replace(holds, noise=SeedNoise(0.0, (1, 2))).judged()
    assert zero[:2] == pytest.approx((holds.low, holds.high)) and zero[2] is None
    with pytest.raises(PolymnesiaError, match="at least 2 seeds"):
        SeedNoise(0.1, (1,))


def test_one_seed_without_a_band_is_neither_holds_nor_contradicted() -> None:
    c = Claim("A beats B", +1, 0.3, 0.2, 0.4, 300, "bootstrap", 0.0001)
    unmeasured = replace(c, unmeasured=f"{UNMEASURED}; run with `seeds: [0, 1, 2]`")
    assert unmeasured.verdict == "seed noise not measured" and not unmeasured.testable
    fixed = correct([unmeasured, c])
    assert fixed[0].p_adjusted is None and fixed[1].p_adjusted == pytest.approx(0.0001)
    summary = verdict_summary([unmeasured])
    assert summary.startswith("0 of the paper's 1 claim was testable at this scale")
    assert "1 one seed, seed noise not measured (run the config with `seeds: [0, 1, 2]`" in summary
    # a precondition is a check of this run's own arms: judged on its own interval
    assert replace(unmeasured, kind="precondition").verdict == "holds"


def test_a_zero_width_interval_is_not_evidence() -> None:
    c = Claim("P2 keeps EA", +1, 0.0, 0.0, 0.0, 300, "paired bootstrap", 1.0, margin=0.05)
    assert c.verdict == "not testable" and c.reason == ZERO_WIDTH and not c.testable
    assert correct([c])[0].p_adjusted is None


def test_extensions_have_a_family_of_their_own_and_preconditions_none() -> None:
    """Adding an arm (an extension) never changes a paper claim's verdict."""
    paper = [
        Claim("donors", -1, -0.057, -0.106, -0.006, 100, "t", 0.02, id="p.donors"),
        Claim("receivers", -1, -0.2, -0.3, -0.1, 100, "t", 0.001, id="p.receivers"),
    ]
    arms = [
        Claim(f"B{i} forgets less", +1, 0.1, 0.05, 0.15, 100, "t", 0.001, kind="extension")
        for i in range(5)
    ]
    setup = Claim("P1 teaches", +1, 0.2, 0.1, 0.3, 100, "t", 0.01, kind="precondition", id="s")
    alone = correct(paper)
    together = correct([*paper, *arms, setup])
    assert [c.p_adjusted for c in together[:2]] == [c.p_adjusted for c in alone]
    assert [c.verdict for c in together[:2]] == ["holds", "holds"]
    assert together[-1].p_adjusted is None and together[-1].correction == ""
    assert [c.p_adjusted for c in together[2:7]] == pytest.approx([0.005] * 5)
    summary = verdict_summary(together)
    assert summary.startswith("2 of the paper's 2 claims were testable at this scale")
    assert "Extensions (comparisons the paper does not make, a family of their own): 5 of 5" in (
        summary
    )
    assert "Setup checks (preconditions, outside the counts and the correction): 1 of 1 pass" in (
        summary
    )
    md = claims_markdown(together)
    assert md.index("| Claim (paper) |") < md.index("Extensions: comparisons the paper does not")
    assert md.index("| Claim (extension) |") < md.index("| Check (setup) |")
    html = claims_html(together)
    assert html.count("<table") == 3 and html.count('<tr class="claim ') == 8
    table = claims_table(together)
    assert [r[table.columns.index("Kind")] for r in table.rows] == (
        ["paper"] * 2 + ["extension"] * 5 + ["precondition"]
    )


def test_a_failed_premise_makes_its_claims_not_applicable() -> None:
    setup = Claim("P1 teaches", +1, 0.01, -0.02, 0.04, 100, "t", 0.5, kind="precondition", id="s")
    claim = Claim("CFT beats mix", +1, 0.2, 0.1, 0.3, 100, "t", 0.001, premise="s")
    fixed = correct([setup, claim])
    assert fixed[1].verdict == "not applicable"
    assert (
        fixed[1].reason == "its premise 'P1 teaches' is inconclusive here (+0.010 [-0.020, +0.040])"
    )
    held = correct([replace(setup, effect=0.2, low=0.1, high=0.3, p_value=0.001), claim])
    assert held[1].verdict == "holds"
    assert correct([claim])[0].verdict == "holds"  # no precondition in the run: not checked
    assert with_premises(fixed) == fixed


def test_equivalence_lies_within_its_margins() -> None:
    eq = Claim("A equals B", +1, 0.01, -0.02, 0.04, 100, "t", margin=0.05, design="equivalence")
    assert eq.verdict == "holds" and eq.test_p() < 0.05
    assert (
        replace(eq, low=-0.06).verdict == "inconclusive" and replace(eq, low=-0.06).test_p() > 0.05
    )
    assert replace(eq, effect=0.2, low=0.1, high=0.3).verdict == "contradicted"
    assert eq.evidence().endswith("; margin ±0.050")
    with pytest.raises(PolymnesiaError, match="needs a margin"):
        judge(+1, 0.0, -0.1, 0.1, design="equivalence")
    with pytest.raises(PolymnesiaError, match="unknown claim design"):
        Claim("x", +1, 0.0, -0.1, 0.1, 1, "t", design="bogus")  # type: ignore[arg-type]
    with pytest.raises(PolymnesiaError, match="unknown claim kind"):
        Claim("x", +1, 0.0, -0.1, 0.1, 1, "t", kind="paperish")  # type: ignore[arg-type]
    assert slug("SHARED LoRA r=11") == "shared_lora_r_11"


def test_an_effect_is_shown_beside_the_papers_number_and_its_headroom_share() -> None:
    """Issue 44: "paper: -0.08 (Table 2)" and the effect as a share of the room above chance
    (-0.06 of a 0.75 headroom: -8%) in the Markdown, HTML and CSV views."""
    c = Claim(
        "VANILLA forgets",
        -1,
        -0.06,
        -0.09,
        -0.03,
        300,
        "paired bootstrap",
        0.001,
        "CBT(VANILLA)",
        "Khelli et al. 2025",
        paper="-0.08 (Table 2)",
        headroom=0.75,
    )
    assert c.headroom_share() == pytest.approx(-0.08)
    assert c.context() == "paper: -0.08 (Table 2); -8% of the headroom above chance"
    assert "; paper: -0.08 (Table 2); -8% of the headroom above chance" in claims_markdown([c])
    assert "paper: -0.08 (Table 2); -8% of the headroom above chance" in claims_html([c])
    table = claims_table([c])
    row = dict(zip(table.columns, table.rows[0], strict=True))
    assert (row["Paper"], row["Headroom share"]) == ("-0.08 (Table 2)", "-8%")
    bare = Claim("A beats B", 1, 0.1, 0.05, 0.15, 100, "paired bootstrap", 0.01)
    assert bare.context() == "" and bare.headroom_share() is None
    assert Claim("x", 1, 0.1, 0.0, 0.2, 10, "t", headroom=0.0).headroom_share() is None

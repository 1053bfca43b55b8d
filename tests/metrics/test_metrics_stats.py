"""Significance tests against Demsar (2006) table values and hand-computed ranks."""

import numpy as np
import pytest
from scipy import stats

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.stats import (
    average_ranks,
    bonferroni_dunn_cd,
    bonferroni_dunn_q,
    friedman,
    friedman_critical,
    nemenyi_cd,
    nemenyi_q,
    paired_ttest,
    significance_marks,
)

# Demsar 2006, Table 5: critical values q_alpha for k = 2..10 classifiers. At k = 9,
# alpha = 0.05 the table value as we have it (2.724) disagrees with the formula the paper
# states (z at 1 - 0.05/16 = 2.734), so that one entry holds the formula's value.
BONFERRONI_DUNN_005 = [1.960, 2.241, 2.394, 2.498, 2.576, 2.638, 2.690, 2.734, 2.773]
BONFERRONI_DUNN_010 = [1.645, 1.960, 2.128, 2.241, 2.326, 2.394, 2.450, 2.498, 2.539]
NEMENYI_005 = [1.960, 2.343, 2.569, 2.728, 2.850, 2.949, 3.031, 3.102, 3.164]


@pytest.mark.parametrize("k", range(2, 11))
def test_q_values_match_demsar_table(k):
    assert bonferroni_dunn_q(k, 0.05) == pytest.approx(BONFERRONI_DUNN_005[k - 2], abs=1e-3)
    assert bonferroni_dunn_q(k, 0.10) == pytest.approx(BONFERRONI_DUNN_010[k - 2], abs=1e-3)
    assert nemenyi_q(k, 0.05) == pytest.approx(NEMENYI_005[k - 2], abs=2e-3)


def test_critical_differences():
    # k = 5, N = 10: 2.498 * sqrt(5 * 6 / 60)
    assert bonferroni_dunn_cd(5, 10) == pytest.approx(2.4977 * np.sqrt(0.5), abs=1e-3)
    assert nemenyi_cd(5, 10) == pytest.approx(2.7278 * np.sqrt(0.5), abs=1e-3)
    with pytest.raises(PolymnesiaError, match="alpha"):
        bonferroni_dunn_cd(5, 10, alpha=1.5)


def test_average_ranks_ties_share_the_mean_rank():
    np.testing.assert_allclose(average_ranks([[0.9, 0.9, 0.5]]), [1.5, 1.5, 3.0])
    np.testing.assert_allclose(
        average_ranks([[0.9, 0.9, 0.5]], higher_is_better=False), [2.5, 2.5, 1.0]
    )


# Ranks per row: [1,2,3], [1,2,3], [2,1,3] -> average [4/3, 5/3, 3]
SCORES = np.array([[0.9, 0.8, 0.1], [0.7, 0.6, 0.5], [0.5, 0.6, 0.2]])


def test_friedman_by_hand():
    np.testing.assert_allclose(average_ranks(SCORES), [4 / 3, 5 / 3, 3.0])
    chi2, p = friedman(SCORES, statistic="chi2")
    # 12*3/(3*4) * (16/9 + 25/9 + 81/9 - 12) = 14/3
    assert chi2 == pytest.approx(14 / 3)
    ref = stats.friedmanchisquare(*SCORES.T)
    assert chi2 == pytest.approx(ref.statistic)
    assert p == pytest.approx(ref.pvalue)
    ff, p_ff = friedman(SCORES)
    assert ff == pytest.approx(2 * (14 / 3) / (3 * 2 - 14 / 3))  # = 7.0
    assert p_ff == pytest.approx(stats.f.sf(7.0, 2, 4))


def test_friedman_critical_matches_paper_003():
    # 003: 4 methods over 3 tasks, "critical is 4.76"
    assert friedman_critical(4, 3, 0.05) == pytest.approx(4.76, abs=0.005)


def test_paired_ttest_matches_scipy_and_handles_constant_differences():
    a, b = [1.0, 2.0, 4.0], [0.5, 1.0, 3.9]
    t, p = paired_ttest(a, b)
    ref = stats.ttest_rel(a, b)
    assert (t, p) == pytest.approx((ref.statistic, ref.pvalue))
    assert paired_ttest([2.0, 3.0], [1.0, 2.0]) == (np.inf, 0.0)
    assert np.isnan(paired_ttest([1.0, 2.0], [1.0, 2.0])[1])
    with pytest.raises(PolymnesiaError, match="equal-length"):
        paired_ttest([1.0, 2.0], [1.0])


def test_significance_marks_like_003_tables():
    results = {
        "lf_mlf": [68.5, 68.7, 68.3],
        "uniform": [67.4, 67.5, 67.3],  # clearly worse -> dot
        "pcgrad": [68.6, 68.2, 68.6],  # indistinguishable
        "oracle": [70.5, 70.8, 70.2],  # clearly better -> open circle
    }
    marks = significance_marks(results)
    assert marks == {"lf_mlf": "", "uniform": "●", "pcgrad": "", "oracle": "○"}
    flipped = significance_marks(results, higher_is_better=False)
    assert flipped["uniform"] == "○" and flipped["oracle"] == "●"
    with pytest.raises(PolymnesiaError, match="reference method 'gem'"):
        significance_marks(results, reference="gem")

"""Significance tests against Demsar (2006) table values and hand-computed ranks."""

import numpy as np
import pytest
from scipy import stats

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.stats import (
    average_ranks,
    bonferroni_dunn_cd,
    bonferroni_dunn_q,
    default_blocks,
    friedman,
    friedman_by_blocks,
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


# (task, language) -> scores of methods A, B, C (seed means; seeds are mean +- 0.05)
CELLS = {
    ("t1", "x"): (0.9, 0.8, 0.7),
    ("t1", "y"): (0.5, 0.7, 0.6),
    ("t2", "x"): (0.6, 0.5, 0.4),
    ("t2", "y"): (0.6, 0.5, 0.4),
    ("t3", "x"): (0.8, 0.6, 0.7),
    ("t3", "y"): (0.8, 0.6, 0.7),
}


def _records():
    out = [("t1", "z", "A", 0.99)]  # only A scored t1:z -> the cell is left out
    for (task, lang), values in CELLS.items():
        for method, v in zip("ABC", values, strict=True):
            out += [(task, lang, method, v - 0.05), (task, lang, method, v + 0.05)]
    return out


def test_friedman_with_tasks_as_blocks_by_hand():
    # task means: t1 A .7 B .75 C .65 -> ranks 2 1 3; t2 -> 1 2 3; t3 A .8 B .6 C .7 -> 1 3 2
    # R = (4/3, 2, 8/3); chi2 = 3 (16/9 + 4 + 64/9 - 12) = 8/3; F_F = 2 (8/3) / (6 - 8/3) = 1.6
    res = friedman_by_blocks(_records(), ["A", "B", "C"], "tasks")
    assert res.blocks == "tasks" and res.block_names == ["t1", "t2", "t3"]
    assert res.ranks == pytest.approx({"A": 4 / 3, "B": 2.0, "C": 8 / 3})
    assert res.statistic == pytest.approx(1.6)
    assert res.p == pytest.approx(stats.f.sf(1.6, 2, 4))
    assert res.critical == pytest.approx(stats.f.ppf(0.95, 2, 4))
    assert res.cd == pytest.approx(bonferroni_dunn_cd(3, 3, 0.1))


def test_languages_as_blocks_inflate_n_and_shrink_p():
    # 6 blocks: ranks A (1,3,1,1,1,1), B (2,1,2,2,3,3), C (3,2,3,3,2,2) -> R = (4/3, 13/6, 5/2)
    # chi2 = 6 (458/36 - 12) = 13/3; F_F = 5 (13/3) / (12 - 13/3) = 65/23
    res = friedman_by_blocks(_records(), ["A", "B", "C"], "languages")
    assert res.block_names == ["t1:x", "t1:y", "t2:x", "t2:y", "t3:x", "t3:y"]
    assert res.statistic == pytest.approx(65 / 23)
    tasks = friedman_by_blocks(_records(), ["A", "B", "C"], "tasks")
    assert res.p < tasks.p and res.cd < tasks.cd


def test_default_blocks_are_tasks_when_there_are_two():
    assert default_blocks(3) == "tasks" and default_blocks(1) == "languages"
    assert friedman_by_blocks(_records(), ["A", "B", "C"]).blocks == "tasks"
    one_task = [r for r in _records() if r[0] == "t1"]
    assert friedman_by_blocks(one_task, ["A", "B", "C"]).blocks == "languages"
    with pytest.raises(PolymnesiaError, match="blocks must be one of tasks, languages"):
        friedman_by_blocks(_records(), ["A", "B", "C"], "seeds")  # type: ignore[arg-type]
    with pytest.raises(PolymnesiaError, match=">= 2 tasks scored by every method"):
        friedman_by_blocks(one_task, ["A", "B", "C"], "tasks")

"""The two-stage pooling of item replicates over training seeds (lifelong's seeds x items)."""

from __future__ import annotations

import numpy as np
import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.uncertainty import two_stage_index, two_stage_mean


def test_index_draws_seeds_with_replacement_and_each_item_resample_once_per_position() -> None:
    seeds, draws = two_stage_index(3, 50, 50, seed=7, shared_items=False)
    assert seeds.shape == draws.shape == (50, 3)
    assert set(np.unique(seeds)) <= {0, 1, 2} and len(np.unique(seeds)) == 3
    for j in range(3):  # a permutation of the 50 item resamples per position
        assert sorted(draws[:, j]) == list(range(50))
    assert not np.array_equal(draws[:, 0], draws[:, 1])
    again = two_stage_index(3, 50, 50, seed=7, shared_items=False)
    assert np.array_equal(again[0], seeds) and np.array_equal(again[1], draws)
    more = two_stage_index(2, 4, 10, seed=0)[1]  # more replicates than resamples: cycles
    assert more.shape == (10, 2) and sorted(more[:8, 0]) == [0, 0, 1, 1, 2, 2, 3, 3]


def test_shared_items_read_one_item_resample_per_replicate() -> None:
    seeds, draws = two_stage_index(3, 50, 50, seed=7)  # the default: seeds share a test set
    assert all(np.array_equal(draws[:, j], draws[:, 0]) for j in range(3))
    assert sorted(draws[:, 0]) == list(range(50))


def test_mean_reads_the_drawn_seed_at_the_drawn_item_resample() -> None:
    values = np.array([[0.0, 1.0, 2.0], [10.0, 11.0, 12.0]])  # 2 seeds x 3 item resamples
    seeds = np.array([[0, 1], [1, 1], [0, 0]])
    draws = np.array([[2, 0], [1, 2], [0, 1]])
    out = two_stage_mean(values, (seeds, draws))
    # (2 + 10) / 2, (11 + 12) / 2, (0 + 1) / 2
    assert out.tolist() == [6.0, 11.5, 0.5]


def test_pooled_spread_covers_seed_variance_that_item_replicates_miss() -> None:
    rng = np.random.default_rng(0)
    # three seeds 0.1 apart, each with a tight item spread (sd 0.01)
    values = np.array([0.5, 0.6, 0.7])[:, None] + rng.normal(0, 0.01, size=(3, 400))
    pooled = two_stage_mean(values, two_stage_index(3, 400, 400, seed=1))
    assert abs(pooled.mean() - 0.6) < 0.01
    assert pooled.std() > 3 * values[0].std()  # seeds dominate the spread
    one = two_stage_mean(values[:1], two_stage_index(1, 400, 400, seed=1))
    assert np.allclose(np.sort(one), np.sort(values[0]))  # one seed: the item replicates


def test_seeds_that_agree_on_shared_items_keep_the_item_spread() -> None:
    # three seeds with the same item replicates (they score the same test items alike): the
    # pooled spread is one seed's; a resample per drawn seed would shrink it by ~1/sqrt(3)
    values = np.tile(np.random.default_rng(3).normal(0.5, 0.02, size=400), (3, 1))
    crossed = two_stage_mean(values, two_stage_index(3, 400, 400, seed=1))
    assert np.allclose(np.sort(crossed), np.sort(values[0]))
    nested = two_stage_mean(values, two_stage_index(3, 400, 400, seed=1, shared_items=False))
    assert 0.45 < nested.std() / values[0].std() < 0.7


def test_differences_pooled_on_one_index_are_paired() -> None:
    rng = np.random.default_rng(2)
    a = rng.normal(0.6, 0.05, size=(3, 200))
    b = a - 0.02  # the same seeds and items, 0.02 lower
    index = two_stage_index(3, 200, 200, seed=0)
    d = two_stage_mean(a, index) - two_stage_mean(b, index)
    assert np.allclose(d, 0.02)


def test_mismatched_shapes_are_refused_in_one_line() -> None:
    index = two_stage_index(2, 5, 5)
    with pytest.raises(PolymnesiaError, match="do not fit an index of 2 seeds"):
        two_stage_mean(np.zeros((3, 5)), index)
    with pytest.raises(PolymnesiaError, match="reads item resample"):
        two_stage_mean(np.zeros((2, 3)), index)
    with pytest.raises(PolymnesiaError, match="at least one seed"):
        two_stage_index(0, 5, 5)

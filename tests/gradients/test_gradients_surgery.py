"""PCGrad and GradVac: Gram-matrix versions against direct [T, D] versions, state."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.gradients import get_combiner
from polymnesia.gradients.base import new_generator, random_orders
from polymnesia.gradients.gradvac import block_grams, gradvac, gradvac_step
from polymnesia.gradients.pcgrad import pcgrad


def conflicting(t: int, d: int, seed: int) -> torch.Tensor:
    """Random rows with a shared component flipped in half of them (many conflicts)."""
    gen = torch.Generator().manual_seed(seed)
    g = torch.randn(t, d, generator=gen, dtype=torch.float64)
    g[::2] -= 2 * torch.randn(d, generator=gen, dtype=torch.float64)
    return g


def pcgrad_direct(grads, orders):
    """PCGrad on materialised copies, as written in Yu et al. 2020, Algorithm 1."""
    projected = grads.clone()
    for i in range(grads.shape[0]):
        for j in orders[i]:
            dot = projected[i] @ grads[j]
            if dot < 0:
                projected[i] -= dot / (grads[j] @ grads[j] + 1e-8) * grads[j]
    return projected


def gradvac_direct(grads, rho_t, orders, beta, sizes):
    """GradVac on materialised copies, block by block (LibMTL's loop order)."""
    out, rho_t = grads.clone(), rho_t.copy()
    bounds = np.cumsum([0, *sizes])
    for i in range(grads.shape[0]):
        for j in orders[i]:
            for k in range(len(sizes)):
                gi, gj = out[i, bounds[k] : bounds[k + 1]], grads[j, bounds[k] : bounds[k + 1]]
                rho = float(gi @ gj / (gi.norm() * gj.norm() + 1e-8))
                tgt = rho_t[k, i, j]
                if rho < tgt:
                    num = gi.norm() * (tgt * math.sqrt(1 - rho**2) - rho * math.sqrt(1 - tgt**2))
                    gi += gj * num / (gj.norm() * math.sqrt(1 - tgt**2) + 1e-8)
                rho_t[k, i, j] = (1 - beta) * tgt + beta * rho
    return out.sum(0), rho_t


@pytest.mark.parametrize("t", [2, 3, 5])
def test_pcgrad_gram_version_equals_direct(t):
    grads = conflicting(t, 40, seed=t)
    orders = random_orders(t, new_generator(7))
    direction, weights = pcgrad(grads, orders)
    projected = pcgrad_direct(grads, orders)
    assert torch.allclose(direction, projected.sum(0), atol=1e-10)
    assert torch.allclose(torch.from_numpy(weights) @ grads, direction, atol=1e-10)


def test_pcgrad_projected_rows_never_conflict_with_originals_in_two_tasks():
    # With T = 2 each projected row is orthogonal to the other original: no conflict left.
    grads = torch.tensor([[1.0, 0.2, -0.5], [-2.0, 1.0, 0.3]], dtype=torch.float64)
    projected = pcgrad_direct(grads, [[1], [0]])
    # (up to the 1e-8 guard in ||g_j||^2 + 1e-8, which leaves a ~1e-8 residual)
    assert projected[0] @ grads[1] >= -1e-7 and projected[1] @ grads[0] >= -1e-7
    direction, _ = pcgrad(grads, [[1], [0]])
    assert torch.allclose(direction, projected.sum(0))


def test_pcgrad_last_projection_removes_the_conflict():
    # For T > 2, the projection onto the last j in the order leaves g_i' . g_j >= 0.
    grads = conflicting(5, 30, seed=1)
    orders = random_orders(5, new_generator(3))
    projected = pcgrad_direct(grads, orders)
    for i in range(5):
        assert projected[i] @ grads[orders[i][-1]] >= -1e-6


def test_pcgrad_state_round_trip_continues_identically():
    grads = [conflicting(4, 20, seed=s) for s in range(4)]
    a = get_combiner("pcgrad", seed=5)
    a(grads[0])
    saved = a.state_dict()
    expected = [a(g) for g in grads[1:]]
    b = get_combiner("pcgrad", seed=99)
    b.load_state_dict(saved)
    assert all(torch.equal(b(g), e) for g, e in zip(grads[1:], expected, strict=True))
    b.reset()
    fresh = get_combiner("pcgrad", seed=99)
    assert torch.equal(b(grads[0]), fresh(grads[0]))


@pytest.mark.parametrize("sizes", [[30], [10, 5, 15]])
def test_gradvac_gram_version_equals_direct(sizes):
    grads = conflicting(4, 30, seed=2)
    orders = random_orders(4, new_generator(1))
    rho0 = np.random.default_rng(0).uniform(-0.3, 0.6, size=(len(sizes), 4, 4))
    direction, _, rho = gradvac(grads, rho0, orders, 0.1, sizes)
    expected, rho_expected = gradvac_direct(grads, rho0, orders, 0.1, sizes)
    assert torch.allclose(direction, expected, atol=1e-9)
    assert np.allclose(rho, rho_expected, atol=1e-12)


def test_gradvac_correction_reaches_the_target_similarity():
    # With T = 2 the corrected g1' has cos(g1', g2) = rho_T exactly (GradVac Eq. 2 design).
    grads = torch.tensor([[1.0, 0.0], [-1.0, 1.0]], dtype=torch.float64)
    rho_t = np.array([[[0.0, 0.5], [0.5, 0.0]]])
    coef, rho = gradvac_step(block_grams(grads, [2]), rho_t, [[1], [0]], 0.01)
    g1p = torch.from_numpy(coef[0, 0]) @ grads
    cos = float(g1p @ grads[1] / (g1p.norm() * grads[1].norm()))
    assert cos == pytest.approx(0.5, abs=1e-7)
    # EMA with the pre-correction rho = -1/sqrt2: 0.99 * 0.5 + 0.01 * (-1/sqrt2)
    assert rho[0, 0, 1] == pytest.approx(0.99 * 0.5 - 0.01 / math.sqrt(2))


def test_gradvac_above_target_is_left_alone_but_target_moves():
    grads = torch.tensor([[1.0, 0.0], [1.0, 1.0]], dtype=torch.float64)  # cos = 1/sqrt2 > 0
    direction, weights, rho = gradvac(grads, np.zeros((1, 2, 2)), [[1], [0]], 0.5, [2])
    assert torch.allclose(direction, grads.sum(0))
    assert rho[0, 0, 1] == pytest.approx(0.5 / math.sqrt(2))


def test_gradvac_blocks_and_state_round_trip():
    grads = [conflicting(3, 12, seed=s) for s in range(4)]
    a = get_combiner("gradvac", beta=0.3, granularity="tensor", sizes=[4, 8])
    a(grads[0])
    assert a.weights is None and a.block_weights.shape == (2, 3)
    saved = a.state_dict()
    expected = [a(g) for g in grads[1:]]
    b = get_combiner("gradvac", beta=0.3, granularity="tensor", sizes=[4, 8])
    b.load_state_dict(saved)
    assert all(torch.equal(b(g), e) for g, e in zip(grads[1:], expected, strict=True))
    assert torch.equal(a.rho_t, b.rho_t)


def test_gradvac_option_and_shape_errors():
    with pytest.raises(ConfigError, match="sizes"):
        get_combiner("gradvac", granularity="module")
    with pytest.raises(ConfigError, match="beta"):
        get_combiner("gradvac", beta=0.0)
    with pytest.raises(PolymnesiaError, match="sum to 5 but grads have D = 6"):
        get_combiner("gradvac", granularity="tensor", sizes=[2, 3])(torch.randn(2, 6))
    combine = get_combiner("gradvac")
    combine(torch.randn(2, 6))
    with pytest.raises(PolymnesiaError, match="T = 2, got 1 blocks and T = 3"):
        combine(torch.randn(3, 6))

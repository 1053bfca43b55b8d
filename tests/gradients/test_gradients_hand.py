"""Every combiner on two conflicting 2-D gradients, worked out by hand.

g1 = (1, 0), g2 = (-1, 1): g1 . g2 = -1, ||g1||^2 = 1, ||g2||^2 = 2,
cos(g1, g2) = -1/sqrt(2).
"""

from __future__ import annotations

import math

import pytest
import torch

from polymnesia.gradients import get_combiner

G = torch.tensor([[1.0, 0.0], [-1.0, 1.0]])


def test_uniform_is_the_mean():
    # ((1 - 1) / 2, (0 + 1) / 2) = (0, 0.5)
    assert torch.allclose(get_combiner("uniform")(G), torch.tensor([0.0, 0.5]))


@pytest.mark.parametrize("reduction,expected", [("sum", [0.5, 1.5]), ("mean", [0.25, 0.75])])
def test_pcgrad(reduction, expected):
    # g1' = g1 - (-1 / 2) g2 = (0.5, 0.5); g2' = g2 - (-1 / 1) g1 = (0, 1)
    # sum = (0.5, 1.5) = 2 g1 + 1.5 g2; mean halves it.
    combine = get_combiner("pcgrad", reduction=reduction)
    assert torch.allclose(combine(G), torch.tensor(expected), atol=1e-6)
    scale = 1.0 if reduction == "sum" else 0.5
    assert torch.allclose(combine.weights, torch.tensor([2.0, 1.5], dtype=torch.float64) * scale)


def test_gradvac_first_step_equals_pcgrad_and_moves_the_target():
    # rho_T = 0, rho = -1/sqrt2 < 0: the correction is
    # ||g_i'|| (0 - rho * 1) / (||g_j|| * 1) = ||g_i'|| / (sqrt2 ||g_j||):
    # for i = 1: 1 / (sqrt2 sqrt2) = 0.5 -> g1' = g1 + 0.5 g2 = (0.5, 0.5)
    # for i = 2: sqrt2 / sqrt2 = 1 -> g2' = g2 + g1 = (0, 1); sum (0.5, 1.5).
    combine = get_combiner("gradvac", beta=0.01)
    assert torch.allclose(combine(G), torch.tensor([0.5, 1.5]), atol=1e-6)
    # EMA with the rho measured before the correction: 0.99 * 0 + 0.01 * (-1/sqrt2)
    expected = -0.01 / math.sqrt(2)
    assert combine.rho_t[0, 0, 1].item() == pytest.approx(expected)
    assert combine.rho_t[0, 1, 0].item() == pytest.approx(expected)
    assert combine.rho_t[0, 0, 0].item() == 0.0


def test_mgda_min_norm_point():
    # ||w g1 + (1 - w) g2||^2 = (2w - 1)^2 + (1 - w)^2, minimal at w = 0.6: d = (0.2, 0.4)
    combine = get_combiner("mgda")
    assert torch.allclose(combine(G), torch.tensor([0.2, 0.4]), atol=1e-6)
    assert torch.allclose(combine.weights, torch.tensor([0.6, 0.4], dtype=torch.float64), atol=1e-6)


def test_lf_mlf_first_step_is_mgda_then_compensates_the_accumulated_update():
    combine = get_combiner("lf_mlf")
    assert torch.allclose(combine(G), torch.tensor([0.2, 0.4]), atol=1e-6)
    # Step 2 with g1 = e1, g2 = e2 and nabla-bar L = (0.2, 0.4):
    # min ||(0.2 + w, 0.4 + 1 - w)||^2 -> w = 0.6, d = (0.6, 0.4) (sum lands on (0.8, 0.8)).
    out = combine(torch.eye(2))
    assert torch.allclose(out, torch.tensor([0.6, 0.4]), atol=1e-6)
    assert torch.allclose(combine.accumulated, torch.tensor([0.8, 0.8]), atol=1e-6)


def test_lf_mlf_common_descent_constraint_binds():
    # With nabla-bar L = (5, 0): c = (g1 . a, g2 . a) = (5, -5) pulls towards w = (0, 1),
    # but then d = g2 and g1 . d = -1 < 0. G w >= 0 means w1 >= w2 and 2 w2 >= w1, i.e.
    # w1 in [0.5, 2/3]; the objective grows with w1, so w = (0.5, 0.5), d = (0, 0.5), g1 . d = 0.
    combine = get_combiner("lf_mlf")
    combine.load_state_dict({"accumulated": torch.tensor([5.0, 0.0]), "steps": 1, "stopped": False})
    assert torch.allclose(combine(G), torch.tensor([0.0, 0.5]), atol=1e-6)
    assert torch.allclose(combine.weights, torch.tensor([0.5, 0.5], dtype=torch.float64), atol=1e-6)
    # Without the b_t constraints the QP would put all weight on g2:
    from polymnesia.gradients.qp import solve_simplex_qp

    free = solve_simplex_qp((G @ G.T).double().numpy(), [5.0, -5.0])
    assert free.w.tolist() == pytest.approx([0.0, 1.0], abs=1e-8)

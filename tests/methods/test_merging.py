"""Model merging: averaging, task arithmetic, TIES on hand-checkable tensors."""

from __future__ import annotations

import pytest
import torch

from polymnesia.errors import ConfigError
from polymnesia.methods.merging import (
    average,
    disjoint_mean,
    elect_sign,
    task_arithmetic,
    task_vectors,
    ties,
    trim,
)


def t(*xs: float) -> torch.Tensor:
    return torch.tensor(xs)


BASE = {"w": t(0.0, 0.0, 0.0, 0.0), "step": torch.tensor([7])}
A = {"w": t(3.0, -2.0, 1.0, 0.5), "step": torch.tensor([7])}
B = {"w": t(-1.0, -1.0, 4.0, 0.0), "step": torch.tensor([7])}
C = {"w": t(-2.0, 1.0, 1.0, -0.5), "step": torch.tensor([7])}


def test_uniform_and_weighted_average() -> None:
    assert average([A, B])["w"].tolist() == [1.0, -1.5, 2.5, 0.25]
    # weights 3:1 are normalised to 0.75, 0.25
    assert average([A, B], [3, 1])["w"].tolist() == [2.0, -1.75, 1.75, 0.375]
    assert average([A, B])["step"].tolist() == [7]  # integer tensors are carried over


def test_average_keeps_dtype_and_refuses_bad_weights() -> None:
    half = {"w": A["w"].half(), "step": A["step"]}
    assert average([half, half])["w"].dtype == torch.float16
    for bad in ([1.0], [-1.0, 2.0], [0.0, 0.0]):
        with pytest.raises(ConfigError, match="weights"):
            average([A, B], bad)


def test_task_arithmetic_is_base_plus_scaled_sum_of_task_vectors() -> None:
    base = {"w": t(1.0, 1.0, 1.0, 1.0), "step": BASE["step"]}
    (tau_a, tau_b) = task_vectors(base, [A, B])
    assert tau_a["w"].tolist() == [2.0, -3.0, 0.0, -0.5]
    # 1 + 0.5 * ((2, -3, 0, -0.5) + (-2, -2, 3, -1)) = (1, -1.5, 2.5, 0.25)
    assert task_arithmetic(base, [A, B], 0.5)["w"].tolist() == [1.0, -1.5, 2.5, 0.25]
    assert torch.equal(task_arithmetic(base, [A], 1.0)["w"], A["w"])


def test_trim_keeps_the_largest_entries() -> None:
    assert trim(t(3.0, -2.0, 1.0, 0.5), 0.5).tolist() == [3.0, -2.0, 0.0, 0.0]
    assert trim(t(3.0, -2.0, 1.0, 0.5), 0.3).tolist() == [3.0, -2.0, 0.0, 0.0]  # ceil(1.2) = 2
    assert trim(t(3.0, -2.0, 1.0, 0.5), 0.25).tolist() == [3.0, 0.0, 0.0, 0.0]
    assert trim(t(1.0, -4.0), 1.0).tolist() == [1.0, -4.0]
    assert trim(t(-1.0, 1.0, -1.0, 4.0), 0.5).tolist() == [-1.0, 0.0, 0.0, 4.0]  # ties: earlier
    with pytest.raises(ConfigError, match="density"):
        trim(t(1.0), 0.0)


def test_elect_sign_and_disjoint_mean_by_hand() -> None:
    trimmed = [t(3.0, -2.0, 0.0, 0.0), t(-1.0, 0.0, 4.0, 0.0), t(-2.0, 1.0, 0.0, 0.0)]
    sign = elect_sign(trimmed)  # sums (0, -1, 4, 0)
    assert sign.tolist() == [0.0, -1.0, 1.0, 0.0]
    # entry 0: sign 0, nobody agrees -> 0; entry 1: only -2 agrees; entry 2: 4; entry 3: none
    assert disjoint_mean(trimmed, sign).tolist() == [0.0, -2.0, 4.0, 0.0]
    trimmed = [t(3.0), t(-1.0), t(1.0)]  # sum 3 > 0: mean of 3 and 1
    assert disjoint_mean(trimmed, elect_sign(trimmed)).tolist() == [2.0]


def test_ties_golden() -> None:
    # density 0.5 keeps 2 of 4 entries per task vector:
    #   A: (3, -2, 0, 0)   B: (-1, 0, 4, 0)   C: (-2, 1, 0, 0)   [ties broken by position]
    # sums (0, -1, 4, 0) -> signs (0, -, +, 0) -> disjoint means (0, -2, 4, 0)
    merged = ties(BASE, [A, B, C], density=0.5, lam=0.5)
    assert merged["w"].tolist() == [0.0, -1.0, 2.0, 0.0]
    assert merged["step"].tolist() == [7]
    # density 1 and one model: TIES is task arithmetic
    assert torch.equal(ties(BASE, [A], density=1.0)["w"], A["w"])


def test_ties_differs_from_task_arithmetic_where_signs_conflict() -> None:
    ta = task_arithmetic(BASE, [A, C], 0.5)["w"]  # (0.5, -0.5, 1, 0)
    ti = ties(BASE, [A, C], density=1.0, lam=1.0)["w"]  # signs (+, -, +, 0)
    assert ta.tolist() == [0.5, -0.5, 1.0, 0.0]
    assert ti.tolist() == [3.0, -2.0, 1.0, 0.0]


def test_models_of_other_architectures_are_refused() -> None:
    with pytest.raises(ConfigError, match="other tensors"):
        average([A, {"v": t(1.0)}])
    with pytest.raises(ConfigError, match="shape"):
        task_arithmetic(BASE, [{"w": t(1.0, 2.0), "step": BASE["step"]}])
    with pytest.raises(ConfigError, match="at least two"):
        average([A])
    with pytest.raises(ConfigError, match="non-float tensor step differs"):
        average([A, {**B, "step": torch.tensor([8])}])


def test_merging_real_model_state_dicts_round_trips() -> None:
    from methods_helpers import tiny_model

    m0, m1 = tiny_model(seed=0).state_dict(), tiny_model(seed=1).state_dict()
    avg = average([m0, m1])
    for k in m0:
        assert torch.allclose(avg[k], (m0[k] + m1[k]) / 2, atol=1e-7)
    back = task_arithmetic(m0, [m1], 1.0)
    assert all(torch.allclose(back[k], m1[k], atol=1e-6) for k in m0)
    model = tiny_model()
    model.load_state_dict(ties(m0, [m1], density=0.3))

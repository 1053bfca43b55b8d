"""Model merging: averaging, task arithmetic, TIES on hand-checkable tensors."""

from __future__ import annotations

import math

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


def test_trim_by_selection_equals_a_stable_sort() -> None:
    # trim finds the k-th magnitude by selection; the rule it must keep is a stable sort's:
    # the k largest magnitudes, equal ones earliest first (many ties from small integers)
    g = torch.Generator().manual_seed(0)
    for _ in range(200):
        x = torch.randint(-3, 4, (int(torch.randint(1, 50, (1,), generator=g)),), generator=g)
        x = x.float()
        density = float(torch.rand(1, generator=g)) * 0.99 + 0.01
        k = math.ceil(density * x.numel())
        order = torch.argsort(x.abs(), descending=True, stable=True)[:k]
        expected = torch.zeros_like(x)
        expected[order] = x[order]
        assert torch.equal(trim(x, density), expected), (x.tolist(), density)


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


def _folder(tmp_path, name: str, seed: int, **kw):  # type: ignore[no-untyped-def]
    from methods_helpers import tiny_model

    model = tiny_model(seed=seed, **kw)
    folder = tmp_path / name
    model.save_pretrained(folder, safe_serialization=True)
    (folder / "tokenizer.json").write_text('{"v": 1}')
    return folder, model.state_dict()


@pytest.mark.parametrize("shard_bytes", [2**30, 2_000])
def test_merge_folders_streams_the_same_merge(tmp_path, shard_bytes: int) -> None:  # type: ignore[no-untyped-def]
    from transformers import AutoModelForCausalLM

    from polymnesia.methods.merging import merge_folders

    (a, sa), (b, sb), (c, sc) = (_folder(tmp_path, n, s) for n, s in (("a", 0), ("b", 1), ("c", 2)))
    cases = [
        ("average", {"weights": [3, 1]}, None, average([sa, sb], [3, 1])),
        ("task_arithmetic", {"lam": 0.5}, a, task_arithmetic(sa, [sb, sc], 0.5)),
        ("ties", {"density": 0.3}, a, ties(sa, [sb, sc], density=0.3)),
    ]
    for method, kw, base, want in cases:
        out = tmp_path / f"out_{method}"
        tuned = [a, b] if base is None else [b, c]
        merge_folders(out, tuned, method, base=base, shard_bytes=shard_bytes, **kw)
        assert (out / "model.safetensors.index.json").is_file() == (shard_bytes < 2**30)
        assert (out / "config.json").is_file() and (out / "tokenizer.json").is_file()
        got = AutoModelForCausalLM.from_pretrained(str(out)).state_dict()
        for k, v in want.items():
            assert torch.allclose(got[k], v, atol=1e-6), (method, k)


def test_merge_folders_refuses_other_architectures_and_tokenizers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from polymnesia.methods.merging import merge_folders

    a, _ = _folder(tmp_path, "a", 0)
    wide, _ = _folder(tmp_path, "wide", 1, intermediate_size=24)
    with pytest.raises(ConfigError, match="shape"):
        merge_folders(tmp_path / "o1", [a, wide], "average")
    deep, _ = _folder(tmp_path, "deep", 1, num_hidden_layers=3)
    with pytest.raises(ConfigError, match="other tensors"):
        merge_folders(tmp_path / "o1", [a, deep], "average")
    other, _ = _folder(tmp_path, "other", 1)
    (other / "tokenizer.json").write_text('{"v": 2}')
    with pytest.raises(ConfigError, match="tokenizer.json differs"):
        merge_folders(tmp_path / "o2", [a, other], "average")
    with pytest.raises(ConfigError, match="needs a base"):
        merge_folders(tmp_path / "o3", [a, other], "ties")
    with pytest.raises(ConfigError, match="unknown method"):
        merge_folders(tmp_path / "o4", [a, other], "slerp")
    assert not (tmp_path / "o1").exists() and not (tmp_path / "o2").exists()

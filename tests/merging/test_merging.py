"""Model merging: averaging, task arithmetic, TIES on hand-checkable tensors."""

from __future__ import annotations

import math

import pytest
import torch

from polymnesia.errors import ConfigError
from polymnesia.merging.maths import average, task_arithmetic, task_vectors, ties
from polymnesia.merging.ties import disjoint_mean, elect_sign, ties_tensor, trim


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

    from polymnesia.merging.folders import merge_folders

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


@pytest.mark.parametrize("shard_bytes", [2**30, 3_000])
def test_merge_folders_writes_the_merged_tensors_bit_for_bit(tmp_path, shard_bytes: int) -> None:  # type: ignore[no-untyped-def]
    # bfloat16 weights and an integer buffer, written tensor by tensor to safetensors files
    from safetensors.torch import load_file, save_file

    from polymnesia.merging.folders import merge_folders

    g = torch.Generator().manual_seed(3)
    base = {
        "w": torch.randn(40, 30, generator=g).bfloat16(),
        "v": torch.randn(500, generator=g),
        "s": torch.tensor(2.5, dtype=torch.float64),
        "ids": torch.arange(7),
    }
    states = [base] + [
        {
            k: (v + torch.randn(v.shape, generator=g, dtype=torch.float64).to(v.dtype) * 0.1)
            if v.is_floating_point()
            else v
            for k, v in base.items()
        }
        for _ in range(2)
    ]
    folders = []
    for i, st in enumerate(states):
        folder = tmp_path / f"m{i}"
        folder.mkdir()
        save_file(st, str(folder / "model.safetensors"), metadata={"format": "pt"})
        folders.append(folder)
    wants = {
        "average": average(states[1:]),
        "task_arithmetic": task_arithmetic(states[0], states[1:], 0.7),
        "ties": ties(states[0], states[1:], density=0.4, lam=0.7),
    }
    for method, want in wants.items():
        out = tmp_path / f"out_{method}"
        kw = {} if method == "average" else {"base": folders[0], "lam": 0.7, "density": 0.4}
        merge_folders(out, folders[1:], method, shard_bytes=shard_bytes, **kw)  # type: ignore[arg-type]
        got = {}
        for f in sorted(out.glob("*.safetensors")):
            got.update(load_file(str(f)))
        assert len(list(out.glob("*.safetensors"))) == (1 if shard_bytes == 2**30 else 2)
        assert set(got) == set(want)
        for k, v in want.items():
            assert got[k].dtype == v.dtype and torch.equal(got[k], v), (method, k)


def test_merge_folders_refuses_other_architectures_and_tokenizers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from polymnesia.merging.folders import merge_folders

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


# --- the fused TIES path (CPU) against a plain one -----------------------------------------


def _ties_plain(base: torch.Tensor, tuned: list[torch.Tensor], density: float, lam: float):  # type: ignore[no-untyped-def]
    """TIES as written in the paper, per tensor, with the trim by a stable sort."""
    work = torch.float64 if base.dtype == torch.float64 else torch.float32
    b = base.to(work)
    trimmed = []
    for x in tuned:
        d = (x.to(work) - b).reshape(-1)
        k = math.ceil(density * d.numel())
        order = torch.argsort(d.abs(), descending=True, stable=True)[:k]
        kept = torch.zeros_like(d)
        kept[order] = d[order]
        trimmed.append(kept.reshape(base.shape))
    stacked = torch.stack(trimmed)
    sign = torch.sign(stacked.sum(0))
    agree = (torch.sign(stacked) == sign) & (stacked != 0)
    total = torch.where(agree, stacked, torch.zeros_like(stacked)).sum(0)
    return (b + lam * (total / agree.sum(0).clamp_min(1))).to(base.dtype)


def _bits(x: torch.Tensor) -> torch.Tensor:
    return x.view({2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()])


def _cases(seed: int, sizes: tuple[int, ...]):  # type: ignore[no-untyped-def]
    """Random bases and tuned models; every other case has many equal magnitudes (task
    vectors of small multiples of 1/2), so the trim's ties decide what is kept."""
    g = torch.Generator().manual_seed(seed)
    for i, n in enumerate(sizes):
        dtype = (torch.float32, torch.bfloat16, torch.float64, torch.float16)[i % 4]
        base = torch.randn(n, generator=g).to(dtype)
        models = 1 + i % 4
        if i % 2:
            steps = [torch.randint(-3, 4, (n,), generator=g) * 0.5 for _ in range(models)]
        else:
            steps = [torch.randn(n, generator=g) * 0.01 for _ in range(models)]
        density = (0.2, 0.5, 1.0, 0.07, 0.93)[i % 5]
        lam = (1.0, 0.6, -0.3)[i % 3]
        yield base, [(base.float() + s).to(dtype) for s in steps], density, lam


def test_fused_ties_equals_the_plain_one_bit_for_bit(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import polymnesia.merging.ties as merging

    monkeypatch.setattr(merging, "TIES_CHUNK", 1000)  # many chunks, ties across their edges
    sizes = (1, 2, 5, 999, 1000, 1001, 4096, 20_000, 40_001, 70_000, 3, 17, 257, 30_000)
    for base, tuned, density, lam in _cases(0, sizes):
        got = ties_tensor(base, tuned, density, lam)
        want = _ties_plain(base, tuned, density, lam)
        assert got.dtype == base.dtype and got.shape == base.shape
        assert torch.equal(_bits(got), _bits(want)), (base.numel(), len(tuned), base.dtype)


def test_fused_ties_keeps_shapes_and_the_reference_path(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import polymnesia.merging.ties as merging

    g = torch.Generator().manual_seed(1)
    base = torch.randn(64, 48, generator=g)
    tuned = [base + torch.randint(-2, 3, base.shape, generator=g) * 0.25 for _ in range(5)]
    for n in (1, 2, 4, 5):  # five models take the reference path
        want = _ties_plain(base, tuned[:n], 0.3, 0.8)
        assert torch.equal(ties_tensor(base, tuned[:n], 0.3, 0.8), want)
    monkeypatch.setattr(merging, "TIES_FUSED_MAX", 0)  # the reference path, as on a GPU
    for n in (1, 2):
        want = _ties_plain(base, tuned[:n], 0.3, 0.8)
        assert torch.equal(ties_tensor(base, tuned[:n], 0.3, 0.8), want)
    monkeypatch.undo()
    # a base of -0.0: where nothing is kept the reference gives -0.0 + 0.0 = +0.0
    zero = torch.full((3000,), -0.0)
    tuned = [zero + torch.randn(3000, generator=g) * 0.01 for _ in range(2)]
    want = _ties_plain(zero, tuned, 0.2, 1.0)
    assert torch.equal(_bits(ties_tensor(zero, tuned, 0.2, 1.0)), _bits(want))
    scalar = ties_tensor(torch.tensor(1.0), [torch.tensor(3.0), torch.tensor(-0.5)], 0.5, 1.0)
    assert scalar.shape == () and float(scalar) == 3.0  # signs conflict: the larger mass wins
    assert ties_tensor(torch.zeros(0), [torch.zeros(0)], 0.2, 1.0).numel() == 0


def test_fused_ties_when_the_sample_misses_the_threshold(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # the sampled bracket is a guess; where it misses, a selection over all magnitudes
    # finds the threshold: the same result
    import polymnesia.merging.ties as merging

    cases = list(_cases(2, (30_000, 50_001, 40_000, 20_000)))
    bracket = merging._bracket
    for wrong in ((0.0, 0.0), (1e9, 2e9), (0.0, 1e-12)):
        for tiers in ((3.5,), (3.5, 8.0)):  # the narrow bracket misses; or both do

            def guess(mag, n, k, width, w=wrong, tiers=tiers):  # type: ignore[no-untyped-def]
                return w if width in tiers else bracket(mag, n, k, width)

            monkeypatch.setattr(merging, "_bracket", guess)
            for base, tuned, density, lam in cases:
                got = ties_tensor(base, tuned, density, lam)
                assert torch.equal(_bits(got), _bits(_ties_plain(base, tuned, density, lam)))


def test_ties_refuses_task_vectors_that_are_not_finite() -> None:
    base = torch.zeros(40_000)
    for bad in (math.nan, math.inf):
        tuned = base.clone()
        tuned[12_345] = bad
        for density in (0.2, 1.0):
            with pytest.raises(ConfigError, match="model 1 holds NaN or infinite"):
                ties_tensor(base, [base + 1, tuned], density, 1.0)

"""Regularisation baselines: L2-SP, EWC / online EWC, LwF distillation (golden values)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from methods_helpers import run, tiny_model

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.methods.regularization import EWC, L2SP, Distill
from polymnesia.penalties.distillation import distillation_loss, distillation_rows
from polymnesia.penalties.fisher import (
    FISHER_FILE,
    diagonal_fisher,
    load_fisher,
    online_fisher,
    save_fisher,
)
from polymnesia.penalties.quadratic import add_penalty_grad_, quadratic_penalty
from polymnesia.training.loss import causal_lm_loss, chunked_head
from polymnesia.training.plugins import LoopState, TrainingPlugin, build_plugins
from polymnesia.training.plugins import validate_plugin_spec as validate


def test_penalty_gradient_equals_autograd_of_the_penalty() -> None:
    g = torch.Generator().manual_seed(0)
    theta = [torch.randn(3, 2, generator=g), torch.randn(4, generator=g)]
    anchors = [torch.randn(3, 2, generator=g), torch.randn(4, generator=g)]
    weights: list[Any] = [torch.rand(3, 2, generator=g), 1.0]
    leaves = [t.clone().requires_grad_() for t in theta]
    quadratic_penalty(leaves, anchors, weights, 0.7).backward()
    params = [torch.nn.Parameter(t.clone()) for t in theta]
    params[0].grad = torch.ones(3, 2)  # added to an existing gradient
    add_penalty_grad_(params, anchors, weights, 0.7)
    assert torch.allclose(params[0].grad, 1 + leaves[0].grad, atol=1e-6)
    assert params[1].grad is not None  # a missing gradient is created
    assert torch.allclose(params[1].grad, leaves[1].grad, atol=1e-6)


@pytest.mark.parametrize("kind", ["ones", "scalars", "tensors"])
def test_fused_penalty_gradient_equals_autograd(kind: str) -> None:
    """Matching shapes and dtypes take the torch._foreach path: the same gradient."""
    g = torch.Generator().manual_seed(1)
    theta = [torch.randn(3, 2, generator=g), torch.randn(5, generator=g)]
    anchors = [torch.randn(3, 2, generator=g), torch.randn(5, generator=g)]
    weights: list[Any] = {
        "ones": [1.0, 1.0],
        "scalars": [2.0, 0.5],
        "tensors": [torch.rand(3, 2, generator=g), torch.rand(5, generator=g)],
    }[kind]
    leaves = [t.clone().requires_grad_() for t in theta]
    quadratic_penalty(leaves, anchors, weights, 0.3).backward()
    params = [torch.nn.Parameter(t.clone()) for t in theta]
    params[1].grad = torch.full((5,), 2.0)
    add_penalty_grad_(params, anchors, weights, 0.3)
    assert torch.allclose(params[0].grad, leaves[0].grad, atol=1e-6)
    assert torch.allclose(params[1].grad, 2 + leaves[1].grad, atol=1e-6)


def test_quadratic_penalty_hand_value() -> None:
    # 3/2 * (2 * (1 - 0)^2 + 1 * (3 - 1)^2) = 3/2 * 6 = 9
    p = quadratic_penalty(
        [torch.tensor([1.0, 3.0])], [torch.tensor([0.0, 1.0])], [torch.tensor([2.0, 1.0])], 3.0
    )
    assert float(p) == 9.0


def _linear() -> torch.nn.Linear:
    lin = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, 2.0]]))
    return lin


def _half_squared_error(model: torch.nn.Module, batch: Any) -> torch.Tensor:
    return 0.5 * ((model(batch["x"]).squeeze(-1) - batch["t"]) ** 2).mean()


def test_fisher_of_a_tiny_linear_model_is_the_hand_value() -> None:
    # w = (1, 2); example 1: x = (1, 0), t = 0 -> residual 1, gradient (1, 0);
    # example 2: x = (1, 1), t = 1 -> residual 2, gradient (2, 2)
    xs, ts = torch.tensor([[1.0, 0.0], [1.0, 1.0]]), torch.tensor([0.0, 1.0])
    per_example = [{"x": xs[i : i + 1], "t": ts[i : i + 1]} for i in range(2)]
    f = diagonal_fisher(_linear(), per_example, _half_squared_error)
    assert f["weight"].tolist() == [[2.5, 2.0]]  # ((1, 0)^2 + (2, 2)^2) / 2
    per_batch = diagonal_fisher(_linear(), [{"x": xs, "t": ts}], _half_squared_error)
    assert per_batch["weight"].tolist() == [[2.25, 1.0]]  # ((1 + 2) / 2, (0 + 2) / 2)^2


def test_fisher_needs_data_and_leaves_grads_alone() -> None:
    lin = _linear()
    with pytest.raises(PolymnesiaError, match="no data"):
        diagonal_fisher(lin, [], _half_squared_error)
    diagonal_fisher(lin, [{"x": torch.ones(1, 2), "t": torch.zeros(1)}], _half_squared_error)
    assert lin.weight.grad is None


def test_online_fisher_decays_the_running_estimate(tmp_path: Path) -> None:
    prev = {"a": torch.tensor([2.0, 4.0])}
    new = {"a": torch.tensor([1.0, 1.0]), "b": torch.tensor([3.0])}
    out = online_fisher(prev, new, 0.5)
    assert out["a"].tolist() == [2.0, 3.0] and out["b"].tolist() == [3.0]
    assert online_fisher(None, new, 0.5)["a"].tolist() == [1.0, 1.0]
    save_fisher(tmp_path / FISHER_FILE, out)
    assert load_fisher(tmp_path / FISHER_FILE)["a"].tolist() == [2.0, 3.0]


class _Grads(TrainingPlugin):
    """Records every parameter's gradient (a clone) at before_optimizer_step."""

    def __init__(self) -> None:
        self.seen: list[dict[str, torch.Tensor]] = []
        self.weights: list[dict[str, torch.Tensor]] = []

    def before_optimizer_step(self, state: LoopState) -> None:
        m = state.unwrapped
        self.seen.append({n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None})
        self.weights.append({n: p.detach().clone() for n, p in m.named_parameters()})


def _added_gradient(plugin: TrainingPlugin, tmp_path: Path, steps: int = 3) -> tuple[Any, Any, Any]:
    model = tiny_model()
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    before, after = _Grads(), _Grads()
    run(model, steps, tmp_path, [before, plugin, after])
    return start, before, after


def test_l2sp_adds_exactly_the_penalty_gradient(tmp_path: Path) -> None:
    plugin = L2SP(alpha=0.5)
    start, before, after = _added_gradient(plugin, tmp_path)
    theta = after.weights[-1]  # step 3: the weights moved away from the start
    pulled = [n for n in theta if "lm_head" not in n]
    leaves = [theta[n].clone().requires_grad_() for n in pulled]
    quadratic_penalty(leaves, [start[n] for n in pulled], [1.0] * len(pulled), 0.5).backward()
    moved = 0
    for n, leaf in zip(pulled, leaves, strict=True):
        added = after.seen[-1][n] - before.seen[-1][n]
        assert torch.allclose(added, leaf.grad, atol=1e-6), n
        moved += int(leaf.grad.abs().max() > 0)
    assert moved > 0
    assert torch.equal(after.seen[-1]["lm_head.weight"], before.seen[-1]["lm_head.weight"])
    assert float(plugin.penalty()) > 0


def test_l2sp_anchor_head_and_beta(tmp_path: Path) -> None:
    _, before, after = _added_gradient(L2SP(alpha=0.5, anchor_head=True), tmp_path / "a")
    assert not torch.equal(after.seen[-1]["lm_head.weight"], before.seen[-1]["lm_head.weight"])
    _, before, after = _added_gradient(L2SP(alpha=0.0, beta=0.25), tmp_path / "b")
    w = after.weights[-1]["lm_head.weight"]
    added = after.seen[-1]["lm_head.weight"] - before.seen[-1]["lm_head.weight"]
    assert torch.allclose(added, 0.25 * w, atol=1e-6)  # d/dw beta/2 ||w||^2


def _train_weights(
    tmp_path: Path, plugins: list[Any], steps: int = 4, **kw: Any
) -> dict[str, torch.Tensor]:
    model = tiny_model()
    run(model, steps, tmp_path, plugins, **kw)
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def test_l2sp_with_alpha_zero_is_plain_training_bit_for_bit(tmp_path: Path) -> None:
    plain = _train_weights(tmp_path / "plain", [], weight_decay=0.1)
    zero = _train_weights(tmp_path / "zero", [L2SP(alpha=0.0)], weight_decay=0.1)
    pulled = _train_weights(tmp_path / "pulled", [L2SP(alpha=1e-3)], weight_decay=0.1)
    assert all(torch.equal(plain[n], zero[n]) for n in plain)
    assert any(not torch.equal(plain[n], pulled[n]) for n in plain)


def test_a_strong_pull_keeps_the_weights_near_the_start(tmp_path: Path) -> None:
    start = {n: p.detach().clone() for n, p in tiny_model().named_parameters()}

    def drift(w: dict[str, torch.Tensor]) -> float:
        return sum(float((w[n] - start[n]).norm() ** 2) for n in w if "lm_head" not in n)

    plain = _train_weights(tmp_path / "plain", [], steps=6, lr=1e-3)
    strong = _train_weights(tmp_path / "strong", [L2SP(alpha=50.0)], steps=6, lr=1e-3)
    assert drift(strong) < drift(plain)


def test_ewc_adds_the_fisher_weighted_gradient(tmp_path: Path) -> None:
    model = tiny_model()
    g = torch.Generator().manual_seed(1)
    fisher = {
        n: torch.rand(p.shape, generator=g) for n, p in model.named_parameters() if "layers.0" in n
    }
    plugin = EWC(lam=3.0, fisher=fisher)
    start, before, after = _added_gradient(plugin, tmp_path)
    theta = after.weights[-1]
    for n, p in theta.items():
        added = after.seen[-1][n] - before.seen[-1][n]
        expected = 3.0 * fisher[n] * (p - start[n]) if n in fisher else torch.zeros_like(p)
        assert torch.allclose(added, expected, atol=1e-6), n


def test_ewc_without_a_previous_task_is_plain_training(tmp_path: Path) -> None:
    plain = _train_weights(tmp_path / "plain", [])
    ewc = _train_weights(tmp_path / "ewc", [EWC(lam=1e6)])
    assert all(torch.equal(plain[n], ewc[n]) for n in plain)


def test_ewc_reads_the_fisher_beside_a_stage_model_folder(tmp_path: Path) -> None:
    save_fisher(tmp_path / FISHER_FILE, {"w": torch.ones(2)})
    assert EWC(fisher=str(tmp_path / "model")).fisher is not None
    with pytest.raises(ConfigError, match="no Fisher estimate"):
        EWC(fisher=str(tmp_path / "elsewhere" / "model"))


def test_ewc_refuses_a_fisher_of_another_model(tmp_path: Path) -> None:
    model = tiny_model()
    name, p = next(iter(model.named_parameters()))
    with pytest.raises(ConfigError, match="another model"):
        run(model, 1, tmp_path, [EWC(fisher={name: torch.ones(p.shape[0] + 1)})])


def test_distillation_loss_hand_value() -> None:
    # teacher (ln 3, 0) -> q = (3/4, 1/4); student (0, 0) -> p = (1/2, 1/2)
    teacher, student = torch.tensor([[math.log(3.0), 0.0]]), torch.zeros(1, 2)
    kl = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)
    assert float(distillation_loss(student, teacher, 1.0)) == pytest.approx(kl, abs=1e-7)
    # at temperature T, logits scaled by T give the same distributions: T^2 * kl
    assert float(distillation_loss(student * 2, teacher * 2, 2.0)) == pytest.approx(
        4 * kl, abs=1e-6
    )
    # (B, L, C) logits: masked positions do not count
    s3, t3 = torch.zeros(1, 2, 2), torch.stack([teacher[0], torch.tensor([9.0, -9.0])])[None]
    assert float(distillation_loss(s3, t3, 1.0, torch.tensor([[1, 0]]))) == pytest.approx(
        kl, abs=1e-7
    )
    assert float(distillation_loss(teacher, teacher, 3.0)) == 0.0


def test_distillation_rows_are_the_rows_of_the_loss_and_their_gradient() -> None:
    g = torch.Generator().manual_seed(2)
    student = (3 * torch.randn(6, 11, generator=g)).requires_grad_()
    teacher = 3 * torch.randn(6, 11, generator=g)
    before = (student.detach().clone(), teacher.clone())
    kl, grad = distillation_rows(student.detach(), teacher, 2.5)
    assert torch.equal(student.detach(), before[0]) and torch.equal(teacher, before[1])
    rows = [
        distillation_loss(student[i : i + 1].detach(), teacher[i : i + 1], 2.5) for i in range(6)
    ]
    torch.testing.assert_close(kl, torch.stack(rows), rtol=1e-6, atol=1e-6)
    distillation_loss(student, teacher, 2.5).backward()  # mean over rows: grad / 6
    assert grad is not None
    torch.testing.assert_close(grad / 6, student.grad, rtol=1e-5, atol=1e-7)
    # hand value: q = (3/4, 1/4), p = (1/2, 1/2) at T = 1; gradient p - q
    kl1, g1 = distillation_rows(torch.zeros(1, 2), torch.tensor([[math.log(3.0), 0.0]]), 1.0)
    hand = 0.75 * math.log(0.75 / 0.5) + 0.25 * math.log(0.25 / 0.5)
    assert float(kl1[0]) == pytest.approx(hand, abs=1e-7)
    assert g1 is not None and torch.allclose(g1, torch.tensor([[-0.25, 0.25]]))
    assert distillation_rows(student.detach(), teacher, 2.5, None)[1] is None
    # weights per row (and a 0-dim tensor): the gradient of sum_i w_i kl_i
    w = torch.rand(6, generator=g)
    student.grad = None
    rows_kl = [distillation_loss(student[i : i + 1], teacher[i : i + 1], 2.5) for i in range(6)]
    (torch.stack(rows_kl) * w).sum().backward()
    _, grad_w = distillation_rows(student.detach(), teacher, 2.5, w)
    torch.testing.assert_close(grad_w, student.grad, rtol=1e-5, atol=1e-7)
    _, grad_3 = distillation_rows(student.detach(), teacher, 2.5, torch.tensor(3.0))
    torch.testing.assert_close(grad_3, 3 * grad, rtol=1e-6, atol=1e-7)


def _padded_batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(4)
    ids = torch.randint(3, 50, (3, 10), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # padding
    mask[2, 4:] = 0
    labels = ids.masked_fill(mask == 0, -100)
    labels[0, :3] = -100  # a prompt: no targets, but distilled
    return {"input_ids": ids, "labels": labels, "attention_mask": mask}


@pytest.mark.parametrize("rows", [1, 7, 1000])
@pytest.mark.parametrize("tied", [False, True])
def test_chunked_distillation_equals_the_unchunked_term_and_its_gradient(
    rows: int, tied: bool
) -> None:
    """The KL made in chunks from the teacher's hidden states beside the chunked
    cross-entropy (``logit_term``) equals the model's own loss plus ``weight *
    distillation_loss`` on the full logits (``loss_term``'s path), value and gradient, on a
    padded batch with a student that is not the teacher."""
    batch = _padded_batch()
    d = Distill(weight=1.5, temperature=2.0)
    d.param_groups(tiny_model(tied=tied, seed=0), [])  # the teacher: a copy of this model
    assert d.chunked_term and d.teacher is not None
    theirs, mine = tiny_model(tied=tied, seed=1), tiny_model(tied=tied, seed=1)
    out = theirs(**batch)
    with torch.no_grad():
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        z0 = d.teacher(**inputs).logits
    kd = distillation_loss(out.logits, z0, 2.0, batch["attention_mask"])
    ref = out.loss + 1.5 * kd
    ref.backward()
    head = chunked_head(mine)
    assert head is not None
    term = d.logit_term(None, batch)  # type: ignore[arg-type]  # the state is not read
    loss = causal_lm_loss(mine, batch, head, rows=rows, terms=[term])
    loss.backward()
    plain = causal_lm_loss(tiny_model(tied=tied, seed=1), batch, head=None)
    assert float(kd.detach()) > 1e-3  # a real KL, not the 0 of a student equal to its teacher
    torch.testing.assert_close(loss, ref, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(loss - plain, 1.5 * kd, rtol=1e-5, atol=1e-6)
    for (name, p), q in zip(mine.named_parameters(), theirs.parameters(), strict=True):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-7, msg=name)


def test_chunked_distillation_under_bf16_autocast_is_close_to_the_unchunked_term() -> None:
    """Under autocast the teacher's and the student's chunks of logits are made in bfloat16,
    as the models' heads make them, and the KL in float32: close to the unchunked path."""
    batch = _padded_batch()
    d = Distill(weight=1.5, temperature=2.0)
    d.param_groups(tiny_model(seed=0), [])
    assert d.teacher is not None
    theirs, mine = tiny_model(seed=1), tiny_model(seed=1)
    head = chunked_head(mine)
    assert head is not None
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = theirs(**batch)
        with torch.no_grad():
            z0 = d.teacher(**{k: v for k, v in batch.items() if k != "labels"}).logits
        ref = out.loss + 1.5 * distillation_loss(out.logits, z0, 2.0, batch["attention_mask"])
        term = d.logit_term(None, batch)  # type: ignore[arg-type]  # the state is not read
        loss = causal_lm_loss(mine, batch, head, rows=4, terms=[term])
    ref.backward()
    loss.backward()
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, ref, rtol=1e-2, atol=1e-2)
    g_mine, g_ref = mine.lm_head.weight.grad, theirs.lm_head.weight.grad
    assert g_mine is not None and g_ref is not None
    cos = torch.nn.functional.cosine_similarity(g_mine.flatten(), g_ref.flatten(), dim=0)
    assert cos > 0.999


def test_distill_with_weight_zero_is_plain_training_bit_for_bit(tmp_path: Path) -> None:
    plain = _train_weights(tmp_path / "plain", [])
    model = tiny_model()
    d = Distill(weight=0.0)
    from methods_helpers import random_data, train_cfg

    from polymnesia.training.loop import train

    train(model, random_data(), train_cfg(4), tmp_path / "d", seed=0, plugins=[d])
    assert all(torch.equal(plain[n], p.detach()) for n, p in model.named_parameters())


def test_distill_keeps_the_outputs_near_the_starting_model(tmp_path: Path) -> None:
    from methods_helpers import random_data, train_cfg

    from polymnesia.training.loop import train

    batch = random_data(n=8, seed=5).collate(list(range(8)))
    start = tiny_model().eval()
    with torch.no_grad():
        z0 = start(input_ids=batch["input_ids"]).logits

    def shift(weight: float, out: Path) -> float:
        model = tiny_model()
        d = Distill(weight=weight, temperature=2.0)
        train(model, random_data(), train_cfg(6, lr=3e-3), out, seed=0, plugins=[d])
        with torch.no_grad():
            z = model.eval()(input_ids=batch["input_ids"]).logits
        return float(distillation_loss(z, z0, 1.0))

    assert shift(20.0, tmp_path / "kd") < shift(0.0, tmp_path / "plain")


def test_distill_term_is_the_kl_to_the_starting_model_on_each_micro_batch(tmp_path: Path) -> None:
    """Without the chunked loss, the loop's first step adds exactly weight * KL(teacher ||
    student) to the model's own loss: at step 1 the student is the teacher, so the KL is 0
    and the loss is plain; the term read from the hook on the student's outputs equals the
    pure function's value."""
    from methods_helpers import random_data, train_cfg

    from polymnesia.training.loop import train

    seen: list[tuple[float, float]] = []

    class Spy(Distill):
        def loss_term(self, state: LoopState, batch: Any, outputs: Any) -> torch.Tensor:
            term = super().loss_term(state, batch, outputs)
            assert self.teacher is not None
            with torch.no_grad():
                inputs = {k: v for k, v in batch.items() if k != "labels"}
                z0 = self.teacher(**inputs).logits
            mask = batch.get("attention_mask")
            ref = self.weight * distillation_loss(outputs.logits, z0, self.temperature, mask)
            seen.append((float(term.detach()), float(ref.detach())))
            return term

    cfg = train_cfg(3, lr=3e-3, chunked_loss=False)
    train(tiny_model(), random_data(), cfg, tmp_path, plugins=[Spy(weight=2.0)])
    assert len(seen) == 3 and seen[0][0] == pytest.approx(0.0, abs=1e-6)
    assert all(t == pytest.approx(r, rel=1e-5, abs=1e-7) for t, r in seen)
    assert seen[-1][0] > 1e-6  # the student moved away from the teacher


def test_chunked_distillation_in_the_loop_makes_no_full_logits(tmp_path: Path) -> None:
    """With the chunked loss (the default) the loop adds the KL from chunks of logits: no
    (B, L, V) logits of the student or the teacher are made, and the trained weights equal
    those of the unchunked path (the model's own loss plus loss_term) up to float rounding."""
    from methods_helpers import VOCAB, random_data, train_cfg

    from polymnesia.training.loop import train

    widths: list[int] = []
    calls: list[str] = []

    class Spy(Distill):
        def loss_term(self, state: LoopState, batch: Any, outputs: Any) -> torch.Tensor:
            calls.append("loss_term")
            return super().loss_term(state, batch, outputs)

        def param_groups(self, model: Any, groups: Any) -> Any:
            groups = super().param_groups(model, groups)
            for m in (model, self.teacher):
                m.lm_head.register_forward_hook(lambda _m, _i, o: widths.append(o.shape[-1]))
            return groups

    weights = {}
    for chunked in (True, False):
        model = tiny_model()
        cfg = train_cfg(3, lr=3e-3, chunked_loss=chunked)
        widths.clear()
        train(model, random_data(), cfg, tmp_path / str(chunked), plugins=[Spy(weight=2.0)])
        weights[chunked] = {n: p.detach().clone() for n, p in model.named_parameters()}
        if chunked:  # the heads passed the hidden states through, student and teacher
            assert widths and VOCAB not in widths and calls == []
        else:
            assert VOCAB in widths and calls == ["loss_term"] * 3
    for name, w in weights[True].items():
        torch.testing.assert_close(w, weights[False][name], rtol=1e-4, atol=1e-6, msg=name)


def test_a_loss_term_with_another_step_function_is_refused(tmp_path: Path) -> None:
    from methods_helpers import random_data, train_cfg

    from polymnesia.training.loop import standard_step, train

    def own_step(state: LoopState, batches: Any) -> torch.Tensor:
        return standard_step(state, batches)

    with pytest.raises(PolymnesiaError, match="'distill' adds a term.*'own_step'"):
        train(
            tiny_model(),
            random_data(),
            train_cfg(1),
            tmp_path,
            plugins=[Distill()],
            step_fn=own_step,
        )


def test_config_entries_are_validated_and_built() -> None:
    spec = validate({"name": "l2sp", "alpha": 0.1})
    assert spec == {"name": "l2sp", "alpha": 0.1, "beta": 0.0, "anchor_head": False}
    assert validate({"name": "ewc"})["lam"] == 100.0
    assert validate({"name": "distill", "temperature": 1.5})["weight"] == 1.0
    with pytest.raises(ValueError, match="plugin l2sp: alpha"):
        validate({"name": "l2sp", "alpha": -1})
    with pytest.raises(ValueError, match="plugin distill: temperature"):
        validate({"name": "distill", "temperature": 0})
    with pytest.raises(ValueError, match="plugin ewc: gamma"):
        validate({"name": "ewc", "gamma": 2})
    (plugin,) = build_plugins([validate({"name": "l2sp", "alpha": 0.2})])
    assert isinstance(plugin, L2SP) and plugin.alpha == 0.2
    with pytest.raises(PolymnesiaError, match="stage input 'prev'"):
        build_plugins([validate({"name": "ewc", "fisher": "prev"})], {})


def test_sharded_engines_accept_the_penalties_and_refuse_distillation() -> None:
    from polymnesia.training.engines import check_engine
    from polymnesia.training.loop import standard_step

    model, d = tiny_model(), Distill()
    check_engine("fsdp2", [L2SP(), EWC()], standard_step, model, standard_step=standard_step)
    with pytest.raises(ConfigError, match="'distill' is refused under fsdp2: its teacher"):
        check_engine("fsdp2", [d], standard_step, model, standard_step=standard_step)
    for engine in ("fsdp", "deepspeed"):
        with pytest.raises(ConfigError, match="'l2sp'"):
            check_engine(engine, [L2SP()], standard_step, model, standard_step=standard_step)

"""The chunked LM-head loss equals the decoder's own loss and gradients (float rounding)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from polymnesia.testing import DECODERS, tiny_model
from polymnesia.training.loss import (
    LogitTerm,
    causal_lm_loss,
    chunked_head,
    linear_cross_entropy,
)


def _batch(vocab: int = 50) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (3, 9), generator=g)
    labels = ids.clone()
    labels[0, :4] = -100  # a prompt, as in instruction tuning
    labels[2, 6:] = -100  # padding
    mask = torch.ones_like(ids)
    mask[2, 6:] = 0
    return {"input_ids": ids, "labels": labels, "attention_mask": mask}


def _grads(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_hand_values_with_a_bias_and_ignored_targets():
    # logits [0, 0, 0] -> ln 3; [ln 2, 0, 0] + bias [0, 0, ln 2] -> p(0) = 2/5
    hidden = torch.tensor([[0.0, 0.0], [math.log(2), 0.0], [5.0, 5.0]], requires_grad=True)
    weight = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], requires_grad=True)
    bias = torch.tensor([0.0, 0.0, 0.0], requires_grad=True)
    targets = torch.tensor([1, 0, -100])
    loss = linear_cross_entropy(hidden, weight, bias, targets, rows=1)
    assert loss.item() == pytest.approx((math.log(3) + math.log(2)) / 2, rel=1e-6)
    bias2 = torch.tensor([0.0, 0.0, math.log(2)])
    loss2 = linear_cross_entropy(hidden.detach(), weight.detach(), bias2, targets, rows=2)
    assert loss2.item() == pytest.approx((math.log(4) + math.log(5 / 2)) / 2, rel=1e-6)
    loss.backward()
    ref = [t.detach().clone().requires_grad_() for t in (hidden, weight, bias)]
    F.cross_entropy(F.linear(ref[0], ref[1], ref[2]), targets, ignore_index=-100).backward()
    for mine, theirs in zip((hidden, weight, bias), ref, strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad)
    assert torch.equal(hidden.grad[2], torch.zeros(2))  # an ignored position: no gradient


def test_no_target_gives_nan_as_the_models_own_loss():
    hidden, weight = torch.zeros(2, 2), torch.eye(2)
    targets = torch.tensor([-100, -100])
    assert math.isnan(linear_cross_entropy(hidden, weight, None, targets, rows=4).item())
    assert math.isnan(F.cross_entropy(hidden @ weight.T, targets).item())


@pytest.mark.parametrize("arch", [a for a in DECODERS if a != "gemma2"])
@pytest.mark.parametrize("rows", [1, 7, 1000])
def test_equals_the_decoders_own_loss_and_gradients(arch: str, rows: int):
    theirs = tiny_model(arch, 50, seed=3)
    mine = tiny_model(arch, 50, seed=3)
    head = chunked_head(mine)
    assert head is not None
    batch = _batch()
    torch.manual_seed(0)  # the same dropout masks (GPT-2 trains with dropout)
    ref = theirs(**batch).loss
    ref.backward()
    torch.manual_seed(0)
    loss = causal_lm_loss(mine, batch, head, rows=rows)
    loss.backward()
    torch.testing.assert_close(loss, ref, rtol=1e-6, atol=1e-6)
    want, got = _grads(theirs), _grads(mine)
    assert want.keys() == got.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], rtol=1e-5, atol=1e-7, msg=name)
    # the head is itself again afterwards
    assert mine(input_ids=batch["input_ids"]).logits.shape[-1] == 50


def test_tied_head_gets_both_gradients():
    theirs = tiny_model("llama", 50, seed=4, tie_word_embeddings=True)
    mine = tiny_model("llama", 50, seed=4, tie_word_embeddings=True)
    assert mine.lm_head.weight is mine.get_input_embeddings().weight
    batch = _batch()
    theirs(**batch).loss.backward()
    causal_lm_loss(mine, batch, chunked_head(mine), rows=5).backward()
    torch.testing.assert_close(
        mine.lm_head.weight.grad, theirs.lm_head.weight.grad, rtol=1e-5, atol=1e-7
    )


def test_frozen_head_gets_no_gradient_and_the_body_the_same():
    theirs = tiny_model("mistral", 50, seed=5)
    mine = tiny_model("mistral", 50, seed=5)
    for m in (theirs, mine):
        m.lm_head.weight.requires_grad_(False)
    batch = _batch()
    theirs(**batch).loss.backward()
    causal_lm_loss(mine, batch, chunked_head(mine), rows=4).backward()
    assert mine.lm_head.weight.grad is None
    for name, g in _grads(theirs).items():
        torch.testing.assert_close(_grads(mine)[name], g, rtol=1e-5, atol=1e-7, msg=name)


def test_under_bf16_autocast_close_to_the_models_own_loss():
    theirs = tiny_model("mistral", 50, seed=6)
    mine = tiny_model("mistral", 50, seed=6)
    batch = _batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = theirs(**batch).loss
        loss = causal_lm_loss(mine, batch, chunked_head(mine), rows=5)
    ref.backward()
    loss.backward()
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, ref, rtol=1e-2, atol=1e-2)
    g_mine, g_ref = mine.lm_head.weight.grad, theirs.lm_head.weight.grad
    assert g_mine.dtype == torch.float32
    cos = F.cosine_similarity(g_mine.flatten(), g_ref.flatten(), dim=0)
    assert cos > 0.999


def test_which_models_get_the_chunked_loss():
    from peft import LoraConfig, get_peft_model

    assert chunked_head(tiny_model("gemma2", 50)) is None  # soft-capped logits
    assert chunked_head(tiny_model("xlm-roberta", 50)) is None  # an encoder
    assert chunked_head(tiny_model("mistral", 50, head="sequence", num_labels=3)) is None
    lora = get_peft_model(
        tiny_model("mistral", 50), LoraConfig(r=2, target_modules=["q_proj", "v_proj"])
    )
    assert chunked_head(lora) is lora.get_base_model().lm_head  # LoRA on the body only
    on_head = get_peft_model(tiny_model("mistral", 50), LoraConfig(r=2, target_modules=["lm_head"]))
    assert chunked_head(on_head) is None  # a wrapped head is not a plain Linear
    hooked = tiny_model("mistral", 50)
    hooked.lm_head.forward = hooked.lm_head.forward  # as Accelerate's device-map hooks do
    assert chunked_head(hooked) is None


def test_lora_model_equals_its_own_loss():
    from peft import LoraConfig, get_peft_model

    models = [
        get_peft_model(
            tiny_model("qwen2", 50, seed=7), LoraConfig(r=2, target_modules=["q_proj", "v_proj"])
        )
        for _ in range(2)
    ]
    batch = _batch()
    ref = models[0](**batch).loss
    ref.backward()
    loss = causal_lm_loss(models[1], batch, chunked_head(models[1]), rows=3)
    loss.backward()
    torch.testing.assert_close(loss, ref, rtol=1e-6, atol=1e-6)
    for name, g in _grads(models[0]).items():
        torch.testing.assert_close(_grads(models[1])[name], g, rtol=1e-5, atol=1e-7, msg=name)


class _HalfSquares(LogitTerm):
    """``c/2 * sum(logits^2) / N``: a term with a hand gradient, ``c * logits / N``."""

    def __init__(self, c: float, n: int) -> None:
        self.c, self.n = c, n
        self.starts: list[int] = []

    def chunk(
        self, start: int, logits: torch.Tensor, grad_scale: torch.Tensor | None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        self.starts.append(start)
        value = self.c / 2 * (logits**2).sum() / self.n
        return value, None if grad_scale is None else logits * (self.c / self.n) * grad_scale


@pytest.mark.parametrize("rows", [1, 3, 1000])
def test_logit_terms_are_added_from_the_same_chunks_with_their_gradients(rows: int):
    g = torch.Generator().manual_seed(2)
    hidden = torch.randn(7, 4, generator=g, requires_grad=True)
    weight = torch.randn(5, 4, generator=g, requires_grad=True)
    bias = torch.randn(5, generator=g, requires_grad=True)
    targets = torch.tensor([1, -100, 4, 0, -100, 2, 3])
    term = _HalfSquares(0.3, 7)
    loss = linear_cross_entropy(hidden, weight, bias, targets, rows, [term])
    loss.backward()
    assert term.starts == list(range(0, 7, rows))
    ref = [t.detach().clone().requires_grad_() for t in (hidden, weight, bias)]
    logits = F.linear(*ref)
    want = F.cross_entropy(logits, targets) + 0.3 / 2 * (logits**2).sum() / 7
    want.backward()
    torch.testing.assert_close(loss, want, rtol=1e-6, atol=1e-6)
    for mine, theirs in zip((hidden, weight, bias), ref, strict=True):
        torch.testing.assert_close(mine.grad, theirs.grad, rtol=1e-5, atol=1e-6)
    # without gradients the term is asked for none, and the value is the same
    quiet = _HalfSquares(0.3, 7)
    with torch.no_grad():
        value = linear_cross_entropy(hidden, weight, bias, targets, rows, [quiet])
    torch.testing.assert_close(value, want.detach(), rtol=1e-6, atol=1e-6)


def test_logit_terms_need_the_chunked_loss():
    model = tiny_model("mistral", 50, seed=1)
    with pytest.raises(ValueError, match="logit terms are made in the chunked loss"):
        causal_lm_loss(model, _batch(), None, terms=[_HalfSquares(1.0, 1)])

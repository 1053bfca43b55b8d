"""Flat-gradient helpers on a tiny torch model."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.gradients import (
    assign_flat_grad,
    block_sizes,
    flatten_grads,
    get_combiner,
    per_language_gradients,
)


def tiny() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2))  # 16 + 10 = 26 params


DATA = {
    "en": (torch.tensor([[1.0, 0.0, 2.0]]), torch.tensor([[0.5, -1.0]])),
    "de": (torch.tensor([[-1.0, 1.0, 0.0]]), torch.tensor([[0.0, 2.0]])),
}


def loss_for(model):
    return lambda lang: ((model(DATA[lang][0]) - DATA[lang][1]) ** 2).sum()


def test_block_sizes_by_granularity():
    named = list(tiny().named_parameters())  # 0.weight 12, 0.bias 4, 2.weight 8, 2.bias 2
    assert block_sizes(named, "whole") == [26]
    assert block_sizes(named, "tensor") == [12, 4, 8, 2]
    assert block_sizes(named, "module") == [16, 10]
    with pytest.raises(ConfigError, match="granularity"):
        block_sizes(named, "layer")


def test_flatten_and_assign_round_trip_with_missing_grads():
    model = tiny()
    params = list(model.parameters())
    params[0].grad = torch.ones_like(params[0])
    flat = flatten_grads(params)
    assert flat.shape == (26,) and flat[:12].eq(1).all() and flat[12:].eq(0).all()
    vec = torch.arange(26.0)
    assign_flat_grad(params, vec)
    assert torch.equal(flatten_grads(params), vec)
    vec.zero_()  # grads are copies, not views of vec
    assert flatten_grads(params)[5] == 5.0
    with pytest.raises(PolymnesiaError, match="1-D vector of 26"):
        assign_flat_grad(params, torch.zeros(25))


def test_per_language_gradients_match_separate_backward_passes():
    model = tiny()
    params = list(model.parameters())
    grads = per_language_gradients(loss_for(model), params, ["en", "de"])
    assert grads.shape == (2, 26)
    assert all(p.grad is None for p in params)
    for t, lang in enumerate(["en", "de"]):
        model.zero_grad(set_to_none=True)
        loss_for(model)(lang).backward()
        assert torch.allclose(grads[t], flatten_grads(params))


def test_reduce_is_applied_to_each_row():
    model = tiny()
    params = list(model.parameters())
    plain = per_language_gradients(loss_for(model), params, ["en", "de"])
    halved = per_language_gradients(loss_for(model), params, ["en", "de"], reduce=lambda r: r / 2)
    in_place = per_language_gradients(
        loss_for(model), params, ["en", "de"], reduce=lambda r: r.mul_(3)
    )
    assert torch.allclose(halved, plain / 2) and torch.allclose(in_place, plain * 3)


def test_bad_loss_is_named():
    model = tiny()
    with pytest.raises(PolymnesiaError, match="language 'en' must be a scalar tensor with grad"):
        per_language_gradients(lambda lang: torch.zeros(2), list(model.parameters()), ["en"])


def test_one_training_step_with_a_combiner():
    model = tiny()
    params = list(model.parameters())
    combine = get_combiner(
        "gradvac", granularity="module", sizes=block_sizes(model.named_parameters(), "module")
    )
    grads = per_language_gradients(loss_for(model), params, ["en", "de"])
    assign_flat_grad(params, combine(grads, languages=["en", "de"]))
    before = [loss_for(model)(lang).item() for lang in DATA]
    torch.optim.SGD(params, lr=0.01).step()
    after = [loss_for(model)(lang).item() for lang in DATA]
    assert after[0] < before[0] and after[1] < before[1]

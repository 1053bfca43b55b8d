"""The callbacks on parameters sharded by FSDP2 (``fully_shard`` in a process group of one,
as polymnesia's FSDP2 engine shards a model): the post-accumulate-grad hooks fire on the
sharded parameters during the backward pass, so the frozen rows' gradient is zero and the
penalty's gradient is in place before anything could clip, and the restore after the step
writes each shard. The Trainer itself does not shard on CPU, so these drive the callbacks'
events by hand around one real forward, backward and AdamW step."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import torch
import torch.distributed as dist
from hf_helpers import random_data, tiny_model, train_cfg, trainer_args
from transformers import TrainerControl, TrainerState

from polymnesia.integrations import FrozenRowsCallback, L2SPCallback
from polymnesia.training import fsdp


@pytest.fixture
def group() -> Iterator[None]:
    created = not dist.is_initialized()
    fsdp.ensure_process_group(torch.device("cpu"))
    yield
    if created:
        dist.destroy_process_group()


def _begin(cb: Any, model: torch.nn.Module, tmp_path: Any) -> torch.optim.Optimizer:
    """on_init_end on the whole model, shard it, then on_train_begin (the Trainer's order)."""
    args, state, control = trainer_args(tmp_path), TrainerState(max_steps=6), TrainerControl()
    cb.on_init_end(args, state, control, model=model)
    fsdp.shard(model, train_cfg(6), torch.device("cpu"))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], weight_decay=0.1)
    cb.on_train_begin(args, state, control, model=model, optimizer=opt, lr_scheduler=None)
    assert cb.engine == "fsdp2"
    return opt


def test_frozen_rows_on_sharded_embeddings(group: None, tmp_path: Any) -> None:
    model = tiny_model()
    start = model.get_input_embeddings().weight.detach().clone()
    cb = FrozenRowsCallback(30)
    opt = _begin(cb, model, tmp_path)
    weight = model.get_input_embeddings().weight
    assert fsdp.is_dtensor(weight)
    model(**random_data(n=4).collate([0, 1, 2, 3])).loss.backward()
    assert fsdp.is_dtensor(weight.grad)
    assert float(fsdp.row_slice(weight.grad, 0, 30).abs().max()) == 0.0  # masked in backward
    assert float(fsdp.row_slice(weight.grad, 30, 50).abs().max()) > 0
    opt.step()
    cb.on_optimizer_step(None, None, None)
    after = fsdp.full_tensor(weight.detach())
    assert torch.equal(after[:30], start[:30])  # despite weight decay
    assert not torch.equal(after[30:], start[30:])


def test_l2sp_head_pull_on_sharded_parameters(group: None, tmp_path: Any) -> None:
    """beta/2 ||theta_H||^2 adds beta * theta_H to the head's gradient from the first step;
    the sharded gradient equals the unsharded model's plus that, up to float rounding."""
    batch = random_data(n=4).collate([0, 1, 2, 3])
    plain = tiny_model()
    plain(**batch).loss.backward()
    head = plain.get_output_embeddings().weight
    expected = head.grad + 0.5 * head.detach()
    model = tiny_model()
    _begin(L2SPCallback(alpha=0.1, beta=0.5), model, tmp_path)
    model(**batch).loss.backward()
    got = fsdp.full_tensor(model.get_output_embeddings().weight.grad)
    assert torch.allclose(got, expected, rtol=0, atol=1e-6)

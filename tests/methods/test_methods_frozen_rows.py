"""frozen_rows: old embedding rows and the body stay bit-identical, even with weight decay."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from methods_helpers import run, tiny_model

from polymnesia.errors import ConfigError
from polymnesia.methods.frozen_rows import FrozenRows, mask_rows_
from polymnesia.training.plugins import build_plugins


def test_mask_rows() -> None:
    g = torch.ones(4, 2)
    mask_rows_(g, 3)
    assert g.tolist() == [[0, 0], [0, 0], [0, 0], [1, 1]]


@pytest.mark.parametrize("tied", [False, True])
def test_frozen_rows_bit_identical_with_weight_decay(tmp_path: Path, tied: bool) -> None:
    model = tiny_model(tied=tied)
    emb0 = model.get_input_embeddings().weight.detach().clone()
    head0 = model.lm_head.weight.detach().clone()
    body0 = {
        n: p.detach().clone()
        for n, p in model.named_parameters()
        if "embed" not in n and "lm_head" not in n
    }
    run(model, 5, tmp_path, [FrozenRows(first_trainable_row=30)], weight_decay=0.5, lr=1e-2)
    emb = model.get_input_embeddings().weight.detach()
    assert torch.equal(emb[:30], emb0[:30])
    assert not torch.equal(emb[30:], emb0[30:])  # new rows train
    for n, p in model.named_parameters():
        if n in body0:
            assert torch.equal(p.detach(), body0[n]), n
    if not tied:
        assert not torch.equal(model.lm_head.weight.detach()[:30], head0[:30])  # head trains whole


def test_without_restore_weight_decay_would_move_rows(tmp_path: Path) -> None:
    """The restore is what keeps rows fixed: gradient masking alone lets decay shrink them."""

    class MaskOnly(FrozenRows):
        def after_optimizer_step(self, state):  # type: ignore[no-untyped-def]
            return None

    model = tiny_model()
    emb0 = model.get_input_embeddings().weight.detach().clone()
    run(model, 3, tmp_path, [MaskOnly(first_trainable_row=30)], weight_decay=0.5, lr=1e-2)
    assert not torch.equal(model.get_input_embeddings().weight.detach()[:30], emb0[:30])


@pytest.mark.parametrize("bad", [-1, 2.0, "x"])
def test_bad_first_row(bad: object) -> None:
    with pytest.raises(ConfigError, match="first_trainable_row"):
        build_plugins([{"name": "frozen_rows", "first_trainable_row": bad}])

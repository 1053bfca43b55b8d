"""Every model-touching method on every tiny architecture it applies to (table-driven).

Each row builds a tiny random model from its transformers config class
(polymnesia.testing) and checks the method finds the right modules by the
model's own API, not by Mistral's names.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from polymnesia.methods.active_forgetting import ActiveForgetting
from polymnesia.methods.frozen_rows import FrozenRows
from polymnesia.methods.layer_freezing import LayerFreezing
from polymnesia.models import anatomy
from polymnesia.models.lora import LoraConfig, add_adapter, trainable_parameters
from polymnesia.testing import ARCHITECTURES, tiny_model
from polymnesia.training.config import TrainConfig
from polymnesia.training.data import PackedLMData
from polymnesia.training.loop import train
from polymnesia.training.multilingual_step import split_params
from polymnesia.training.plugins import LoopState, TrainingPlugin

VOCAB, PAD = 60, 1
DIMS: dict[str, Any] = dict(
    hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2
)
#: architecture -> (tied LM head, attention roles)
EXPECTED = {
    "mistral": (False, {"q", "k", "v", "o"}),
    "llama": (False, {"q", "k", "v", "o"}),
    "qwen2": (False, {"q", "k", "v", "o"}),
    "gemma": (True, {"q", "k", "v", "o"}),
    "gemma2": (True, {"q", "k", "v", "o"}),
    "gpt2": (True, {"qkv", "o"}),
    "xlm-roberta": (True, {"q", "k", "v", "o"}),
}
ARCHS = list(ARCHITECTURES)


def lm(arch: str, seed: int = 0) -> torch.nn.Module:
    return tiny_model(arch, VOCAB, pad_token_id=PAD, seed=seed, **DIMS)


def classifier(arch: str) -> torch.nn.Module:
    return tiny_model(arch, VOCAB, head="sequence", num_labels=3, pad_token_id=PAD, **DIMS)


def fit(model: torch.nn.Module, out: Path, plugins: list[Any], steps: int = 3) -> None:
    g = torch.Generator().manual_seed(0)
    data = PackedLMData(torch.randint(3, VOCAB, (32, 8), generator=g))
    cfg = TrainConfig(
        steps=steps,
        batch_size=4,
        block_size=8,
        lr=1e-2,
        warmup_ratio=0.0,
        weight_decay=0.1,
        log_every=1,
        checkpoint_every=1000,
        progress_bar=False,
    )
    train(model, data, cfg, out, seed=0, plugins=plugins)


def test_table_covers_every_architecture() -> None:
    assert set(EXPECTED) == set(ARCHITECTURES)


@pytest.mark.parametrize("arch", ARCHS)
def test_anatomy(arch: str) -> None:
    model = lm(arch)
    is_tied, roles = EXPECTED[arch]
    assert anatomy.input_embeddings(model, "t").weight.shape[0] == VOCAB
    assert anatomy.tied(model) == is_tied
    assert len(anatomy.blocks(model, "t")) == 2
    projections = anatomy.attention_projections(model, "t")
    assert set(projections) == roles and all(len(v) == 2 for v in projections.values())
    emb = anatomy.embedding_parameter_names(model)
    assert (
        anatomy.input_embeddings(model, "t").weight
        is dict(model.named_parameters())[
            next(n for n in emb if "pos" not in n and "type" not in n)
        ]
        or len(emb) >= 1
    )


class AfterReset(TrainingPlugin):
    """Snapshot of the embeddings after each step (listed after the plugin under test)."""

    def __init__(self) -> None:
        self.after: dict[int, torch.Tensor] = {}

    def after_optimizer_step(self, state: LoopState) -> None:
        w = anatomy.input_embeddings(state.unwrapped, "t").weight
        self.after[state.step] = w.detach().clone()


@pytest.mark.parametrize("arch", ARCHS)
def test_active_forgetting_redraws_the_token_embeddings(arch: str, tmp_path: Path) -> None:
    model, rec = lm(arch), AfterReset()
    plugin = ActiveForgetting(reset_every=2)
    fit(model, tmp_path, [plugin, rec])
    assert plugin.resets == [2]
    g = torch.Generator().manual_seed(0 * 1_000_003 + 2)
    want = torch.randn((VOCAB, 16), generator=g) * 0.02
    want[PAD] = 0.0
    torch.testing.assert_close(rec.after[2], want, rtol=0, atol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_frozen_rows_keep_old_rows_and_body(arch: str, tmp_path: Path) -> None:
    model = lm(arch)
    first = VOCAB - 10
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    fit(model, tmp_path, [FrozenRows(first_trainable_row=first)])
    emb = anatomy.input_embeddings(model, "t").weight.detach()
    name = next(
        n for n, p in model.named_parameters() if p is anatomy.input_embeddings(model, "t").weight
    )
    assert torch.equal(emb[:first], before[name][:first])
    assert not torch.equal(emb[first:], before[name][first:])
    body = [
        n for n, _ in model.named_parameters() if n not in anatomy.embedding_parameter_names(model)
    ]
    for n in body:
        if "lm_head" not in n:  # a head bias (XLM-R) trains with the head
            assert torch.equal(dict(model.named_parameters())[n].detach(), before[n]), n


@pytest.mark.parametrize("arch", ARCHS)
def test_spectrum_layer_freezing_never_freezes_embeddings(arch: str, tmp_path: Path) -> None:
    model = lm(arch)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    plugin = LayerFreezing(strategy="spectrum", pct=50)
    fit(model, tmp_path, [plugin], steps=2)
    assert plugin.frozen and not set(plugin.frozen) & anatomy.embedding_parameter_names(model)
    after = dict(model.named_parameters())
    for n in plugin.frozen:
        assert torch.equal(after[n].detach(), before[n]), n
    by_layer = LayerFreezing(strategy="random", top_k=1, by="layer", seed=0)
    m = lm(arch)
    by_layer.param_groups(m, [{"params": list(m.parameters())}])
    blocks = [name for name, _ in anatomy.blocks(m, "t")]
    assert by_layer.frozen and all(
        any(n.startswith(b + ".") for b in blocks) for n in by_layer.frozen
    )


@pytest.mark.parametrize("arch", ARCHS)
def test_lora_adapts_every_attention_projection(arch: str) -> None:
    r = 2
    model = add_adapter(classifier(arch), r, LoraConfig(), "sequence")
    inner = anatomy.unwrap(model)
    adapted = {n.rsplit(".lora_A", 1)[0] for n, _ in inner.named_modules() if n.endswith(".lora_A")}
    expected = {p for names in anatomy.attention_projections(inner, "t").values() for p in names}
    assert adapted == expected
    lora = sum(p.numel() for n, p in model.named_parameters() if "lora_" in n)
    assert lora > 0 and trainable_parameters(model) > lora  # plus the new head
    ids = torch.tensor([[2, 5, 7, 9]])
    assert model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits.shape == (1, 3)


@pytest.mark.parametrize("arch", ARCHS)
def test_per_language_step_splits_body_and_head(arch: str) -> None:
    model = classifier(arch)
    shared, head = split_params(model)
    body_ids = {id(p) for p in anatomy.body(model, "t").parameters()}
    assert shared and all(id(p) in body_ids for p in shared)
    assert head and not any(id(p) in body_ids for p in head)
    assert sum(p.numel() for p in shared) + sum(p.numel() for p in head) == sum(
        p.numel() for p in model.parameters()
    )


def test_methods_refuse_a_model_without_the_parts_in_one_line(tmp_path: Path) -> None:
    plain = torch.nn.Sequential(torch.nn.Linear(4, 4))
    with pytest.raises(anatomy.NotApplicable) as e:
        ActiveForgetting(reset_every=2).param_groups(plain, [{"params": list(plain.parameters())}])
    msg = str(e.value)
    assert (
        msg.startswith("active_forgetting cannot apply to Sequential") and "input embedding" in msg
    )
    assert "\n" not in msg
    with pytest.raises(
        anatomy.NotApplicable,
        match=r"^LoRA cannot apply to Sequential .*attention projections are not known",
    ):
        add_adapter(plain, 2, LoraConfig(), "sequence")
    with pytest.raises(anatomy.NotApplicable, match="per-language gradients cannot apply"):
        split_params(plain)
    with pytest.raises(anatomy.NotApplicable, match=r"frozen_rows cannot apply to Sequential"):
        FrozenRows(first_trainable_row=1).param_groups(plain, [])

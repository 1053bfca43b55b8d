"""The memory planner: hand-checked byte counts, monotonicity, the refusal, `polymnesia plan`."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from polymnesia.cli.main import main
from polymnesia.errors import ConfigError
from polymnesia.training.memory import GIB, Setup, block_activation_bytes, plan
from polymnesia.training.memory_fit import check_fits, frozen_fraction, plan_for_model, precision_of
from polymnesia.training.model_shape import ModelShape
from polymnesia.training.plugins import plugin_options

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
#: 2 layers, 8 wide, 2 heads of 4 (1 key/value head), MLP 16, vocabulary 10, untied
TINY = ModelShape(8, 2, 2, 1, 16, 10)


def test_parameters_of_a_tiny_decoder_by_hand() -> None:
    # q 8x8, k 8x4, v 8x4, o 8x8, gate/up 8x16, down 16x8, two norms of 8
    assert TINY.block_params == 64 + 32 + 32 + 64 + 3 * 128 + 16 == 592
    assert TINY.root_params == 10 * 8 + 10 * 8 + 8 == 168  # embeddings, head, final norm
    assert TINY.total_params == 2 * 592 + 168 == 1352
    assert dataclasses.replace(TINY, tied_embeddings=True).total_params == 1352 - 80


def _tiny_mistral() -> Any:
    """TINY as transformers builds it."""
    from transformers import MistralConfig, MistralForCausalLM

    conf = MistralConfig(
        vocab_size=10,
        hidden_size=8,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=16,
        tie_word_embeddings=False,
    )
    return MistralForCausalLM(conf)


def test_the_formula_counts_what_transformers_builds() -> None:
    model = _tiny_mistral()
    assert ModelShape.from_hf_config(model.config).total_params == TINY.total_params
    assert sum(p.numel() for p in model.parameters()) == TINY.total_params


def test_a_live_model_is_planned_from_its_config_and_requires_grad() -> None:
    from polymnesia.training.config import TrainConfig

    model = _tiny_mistral()
    cfg = TrainConfig(batch_size=8, grad_accum=2)
    p = plan_for_model(model, cfg, seq_len=4, engine="ddp", devices=2, device_type="cpu")
    assert p.trainable == TINY.total_params and p.setup.micro_batch == 2
    assert p.setup.precision == "fp32" and p.setup.engine == "ddp"
    for w in model.model.layers[0].parameters():
        w.requires_grad_(False)
    frozen = plan_for_model(model, cfg, seq_len=4, device_type="cpu")
    assert frozen.trainable == TINY.total_params - TINY.block_params


def test_parameter_gradient_and_adam_bytes_by_hand() -> None:
    fp32 = plan(TINY, Setup(precision="fp32", fused_adamw=True))
    assert fp32.parameters == 4 * 1352
    assert fp32.optimizer == 2 * 4 * 1352  # two float32 moments
    bf16 = plan(TINY, Setup(precision="bf16", fused_adamw=True))
    assert bf16.parameters == 2 * 1352 and bf16.optimizer == 2 * 2 * 1352
    mixed = plan(TINY, Setup(precision="bf16-mixed", fused_adamw=True))
    assert mixed.parameters == 4 * 1352 and mixed.optimizer == 8 * 1352  # float32 masters
    # FSDP2 on 4 devices: a quarter of each (rounded up)
    sharded = plan(TINY, Setup(precision="fp32", engine="fsdp2", devices=4, fused_adamw=True))
    assert sharded.parameters == 4 * 1352 // 4 and sharded.optimizer == 8 * 1352 // 4
    step = plan(TINY, Setup(precision="fp32", micro_batch=1, seq_len=2, fused_adamw=True))
    assert step.phase in ("backward end", "optimizer step") and step.gradients == 4 * 1352


def test_activation_bytes_per_token_by_hand() -> None:
    # fp32 sdpa: 4 (6h + 2q + 2k + 4I) + 4q + 4n with k = q (keys/values repeated)
    s = Setup(precision="fp32", seq_len=4)
    assert block_activation_bytes(TINY, s) == 4 * (48 + 16 + 16 + 64) + 32 + 8 == 616
    eager = dataclasses.replace(s, attention="eager")  # the softmax: 4 n s
    assert block_activation_bytes(TINY, eager) == 4 * (48 + 16 + 16 + 64) + 4 * 2 * 4


def test_more_fsdp2_devices_hold_less_per_device() -> None:
    shape = ModelShape.from_preset("base", 32000)
    totals = [
        plan(shape, Setup(engine="fsdp2", devices=n, micro_batch=4, seq_len=512)).total
        for n in (1, 2, 4, 8)
    ]
    assert totals == sorted(totals, reverse=True) and len(set(totals)) == 4
    ddp = plan(shape, Setup(engine="ddp", devices=8, micro_batch=4, seq_len=512))
    assert totals[-1] < ddp.total


def test_checkpointing_keeps_fewer_activations_and_lora_fewer_adam_bytes() -> None:
    shape = ModelShape.from_preset("paper-400m", 32000)
    s = Setup(precision="bf16-mixed", micro_batch=8, seq_len=1024)
    full, ckpt = plan(shape, s), plan(shape, dataclasses.replace(s, gradient_checkpointing=True))
    assert ckpt.activations < full.activations / 3 and ckpt.total < full.total
    lora = plan(shape, dataclasses.replace(s, lora_rank=16))
    assert lora.optimizer < full.optimizer / 50 and lora.trainable < full.trainable
    frozen = plan(shape, dataclasses.replace(s, frozen_fraction=0.5))
    assert lora.optimizer < frozen.optimizer < full.optimizer


def test_precision_and_frozen_share_from_a_config() -> None:
    assert precision_of("bfloat16", "bf16") == "bf16"
    assert precision_of("float32", "bf16") == "bf16-mixed"
    assert precision_of("float32", "no") == "fp32"
    shape = ModelShape.from_preset("tiny", 1000)  # 2 layers
    matrices = sum(a * b for a, b in shape.matrices().values()) / shape.block_params
    freeze = {"name": "layer_freezing", "strategy": "random"}

    def share(*entries: dict) -> float:  # as a config's train.plugins holds them: typed
        return frozen_fraction(shape, [plugin_options(e) for e in entries])

    assert share(freeze) == pytest.approx(0.5 * matrices)  # pct 50
    assert share({**freeze, "top_k": 1}) == pytest.approx(0.5 * matrices)
    qkv = {**freeze, "top_k": 2, "pattern": r"self_attn\.(q|k|v)_proj"}
    q, k, _ = (a * b for a, b in list(shape.matrices().values())[:3])
    assert share(qkv) == pytest.approx((q + 2 * k) / shape.block_params)
    assert share({**freeze, "top_k": 1, "freeze": "unselected"}) == pytest.approx(0.5 * matrices)
    assert share({"name": "l2sp"}, {"name": "distill"}) == 0.0  # they freeze nothing


def test_a_stage_that_does_not_fit_is_refused_in_one_line_naming_remedies() -> None:
    shape = ModelShape.from_preset("paper-1.6b", 32000)
    p = dataclasses.replace(
        plan(shape, Setup(precision="bf16-mixed", micro_batch=16, seq_len=2048)), label="p1"
    )
    check_fits(p, None)  # unknown size: nothing to say
    check_fits(p, p.total)  # exactly enough
    with pytest.raises(ConfigError) as e:
        check_fits(p, 24 * GIB)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("stage 'p1' needs about ")
    assert "GiB per device" in msg and "the device has 24.0 GiB" in msg
    assert "it would fit with" in msg
    assert "gradient_checkpointing" in msg or "fsdp2" in msg
    for remedy in msg.split("it would fit with ")[1].split("; or "):
        assert remedy  # each named remedy is a non-empty phrase


def test_a_tiny_device_gets_the_combination_or_a_bigger_device() -> None:
    p = plan(ModelShape.from_preset("paper-1.6b", 32000), Setup(micro_batch=16, seq_len=2048))
    with pytest.raises(ConfigError, match="a device with more memory"):
        check_fits(p, 2**20)


def test_setup_refuses_what_no_engine_does() -> None:
    with pytest.raises(ConfigError, match="offload needs engine fsdp2"):
        Setup(offload=True)
    with pytest.raises(ConfigError, match="engine single trains on 1"):
        Setup(devices=2)


def test_the_plan_command_on_the_paper_config(capsys) -> None:  # type: ignore[no-untyped-def]
    config = str(CONFIGS / "two_phase_paper.yaml")
    offline = [
        "evaluate.harness.english=[poly_genre_en]",
        "evaluate.harness.multilingual=[poly_genre_de]",
    ]
    args = ["plan", config, *offline, "--devices", "8", "--memory", "80GB", "--engine", "fsdp2"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "mistralai/Mistral-7B-v0.1: 7,241.7M parameters" in out
    lines = [x for x in out.splitlines() if x.startswith("p1_alpaca ")]
    assert len(lines) == 1 and "fsdp2 x8, bf16, micro-batch 2 x 1024" in lines[0]
    assert lines[0].endswith("fits") and "DOES NOT FIT" not in out
    assert "LoRA r64" in next(x for x in out.splitlines() if x.startswith("mit_LoRA "))
    assert main(["plan", config, *offline, "--memory", "80GB"]) == 0  # one device: too small
    out = capsys.readouterr().out
    assert "DOES NOT FIT" in out and "would fit with" in out


def test_the_plan_command_on_a_preset_config(capsys) -> None:  # type: ignore[no-untyped-def]
    config = str(CONFIGS / "quickstart.yaml")
    assert main(["plan", config, "train.batch_size=32", "--device-type", "cpu"]) == 0
    out = capsys.readouterr().out
    assert "preset tiny" in out and "micro-batch 32 x 128" in out
    with pytest.raises(SystemExit):
        main(["plan", config, "--memory", "lots"])
    assert "is not a memory size" in capsys.readouterr().err

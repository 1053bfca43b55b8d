"""Training options of the runtime issue: per-stage mixed precision in one process, fused
AdamW, torch.compile and gradient checkpointing options, flattened tracker config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from test_training_loop import cfg, data, losses, nano_model

from polymnesia.training.loop import standard_step, train
from polymnesia.training.plugins import LoopState


def _recording_step(seen: list[Any]):  # type: ignore[no-untyped-def]
    def step(state: LoopState, batches: list[dict[str, torch.Tensor]]) -> torch.Tensor:
        with state.accelerator.autocast():
            seen.append((state.accelerator.mixed_precision, torch.is_autocast_enabled("cpu")))
        return standard_step(state, batches)

    return step


def test_stages_train_in_their_own_precision_in_one_process(tmp_path: Path) -> None:
    """bf16, then float32, then bf16 again: Accelerate's one-precision-per-process rule no
    longer stops the second stage, and each stage really runs in its precision."""
    seen: dict[str, list[Any]] = {}
    for name, precision in (("a", "bf16"), ("b", "no"), ("c", "bf16")):
        seen[name] = []
        _, result = train(
            nano_model(),
            data(),
            cfg(steps=2, mixed_precision=precision),
            tmp_path / name,
            step_fn=_recording_step(seen[name]),
        )
        assert result.steps == 2
    assert set(seen["a"]) == set(seen["c"]) == {("bf16", True)}
    assert set(seen["b"]) == {("no", False)}
    # float32 after bf16 is the float32 run of a fresh process
    _, alone = train(nano_model(), data(), cfg(steps=2), tmp_path / "alone")
    assert losses(tmp_path / "b") == losses(tmp_path / "alone")


def test_fused_adamw_and_gradient_checkpointing_train_like_the_default(tmp_path: Path) -> None:
    _, ref = train(nano_model(), data(), cfg(steps=4), tmp_path / "ref")
    for name, options in (
        ("fused", {"fused_adamw": True}),
        ("ckpt", {"gradient_checkpointing": True}),
    ):
        _, got = train(nano_model(), data(), cfg(steps=4, **options), tmp_path / name)
        assert losses(tmp_path / name) == pytest.approx(losses(tmp_path / "ref"), rel=1e-4), name


def test_fused_adamw_is_used_where_asked() -> None:
    from polymnesia.training.loop import _optimizer

    model = nano_model()
    opt, _ = _optimizer(model, cfg(fused_adamw=True), [], torch.device("cpu"))
    assert opt.defaults["fused"] is True
    opt, _ = _optimizer(model, cfg(), [], torch.device("cpu"))  # default: CUDA only
    assert not opt.defaults["fused"]


@pytest.mark.integration  # compiles with inductor: tens of seconds on CPU
def test_compile_option_trains_like_eager(tmp_path: Path) -> None:
    import shutil

    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("torch.compile on CPU needs a C++ compiler")
    train(nano_model(), data(), cfg(steps=3), tmp_path / "eager")
    model, _ = train(nano_model(), data(), cfg(steps=3, compile=True), tmp_path / "compiled")
    assert losses(tmp_path / "compiled") == pytest.approx(losses(tmp_path / "eager"), rel=1e-3)
    assert not any(k.startswith("_orig_mod") for k in model.state_dict())


def test_models_are_built_with_sdpa_attention(make_tok_model) -> None:  # type: ignore[no-untyped-def]
    from polymnesia.models.build import ModelConfig, build_model

    tok, _ = make_tok_model(["a b c d"])
    model = build_model(ModelConfig(preset="nano"), tok)
    assert model.config._attn_implementation == "sdpa"  # type: ignore[union-attr]


def test_sharded_engines_refuse_parameter_editing_methods() -> None:
    from polymnesia.errors import ConfigError
    from polymnesia.methods.active_forgetting import ActiveForgetting
    from polymnesia.training.engines import check_engine, engine_name

    model = nano_model()
    plugin = ActiveForgetting(reset_every=2)
    for engine in ("single", "ddp"):
        check_engine(engine, [plugin], standard_step, model, standard_step=standard_step)
    check_engine("fsdp", [], standard_step, model, standard_step=standard_step)
    for engine in ("fsdp", "deepspeed"):
        with pytest.raises(ConfigError, match=f"'active_forgetting' .* under {engine}"):
            check_engine(engine, [plugin], standard_step, model, standard_step=standard_step)

    def per_language(state, batches):  # type: ignore[no-untyped-def]
        return standard_step(state, batches)

    with pytest.raises(ConfigError, match="step function 'per_language' .* under fsdp"):
        check_engine("fsdp", [], per_language, model, standard_step=standard_step)

    class Acc:
        class distributed_type:  # noqa: N801
            value = "FSDP"

    assert engine_name(Acc()) == "fsdp"
    Acc.distributed_type.value = "MULTI_CPU"
    assert engine_name(Acc()) == "ddp"


def test_flops_per_token_by_hand() -> None:
    from polymnesia.training.flops import (
        forward_flops_per_token,
        matmul_parameters,
        mfu,
        train_flops_per_token,
    )

    assert train_flops_per_token(100, 2, 8, 16) == 6 * 100 + 12 * 2 * 8 * 16
    assert forward_flops_per_token(100, 2, 8, 16) == 2 * 100 + 4 * 2 * 8 * 16
    assert mfu(1000.0, 2e6, 4e9) == pytest.approx(0.5)
    model = nano_model()  # untied: the 40 x 32 input table is the only lookup
    total = sum(p.numel() for p in model.parameters())
    assert matmul_parameters(model) == total - 40 * 32


def test_cli_leaves_the_process_group_when_it_is_done(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A process that joined a gloo group leaves it at the end of a command, so no gloo
    thread is alive when the interpreter exits (an abort that failed a 2-process run)."""
    import torch.distributed as dist

    from polymnesia.cli.main import main

    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1
    )
    assert dist.is_initialized()
    assert main(["ls", "presets"]) == 0
    assert not dist.is_initialized()


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is a CPU's")
def test_fp16_training_on_a_cpu_is_refused_in_one_line(tmp_path: Path) -> None:
    """Accelerate makes no fp16 autocast or scaler on a CPU and would train in float32 while
    the run records fp16: the loop refuses before the first step, and writes nothing."""
    from polymnesia.errors import ConfigError

    with pytest.raises(ConfigError, match=r"mixed_precision=fp16 needs a GPU.*bf16 or no"):
        train(nano_model(), data(), cfg(steps=2, mixed_precision="fp16"), tmp_path / "run")
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_train_configs_are_found_with_their_paths() -> None:
    from pydantic import BaseModel

    from polymnesia.training.config import TrainConfig, check_precision, train_configs

    class Stage(BaseModel):
        train: TrainConfig = TrainConfig()
        arms: dict[str, TrainConfig] = {}
        steps: list[int] = []

    node = Stage(arms={"x": TrainConfig(mixed_precision="fp16")})
    assert [p for p, _ in train_configs(node)] == ["train", "arms.x"]
    check_precision(node, "cuda", "here")  # an accelerator takes fp16
    from polymnesia.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^here: arms\.x\.mixed_precision=fp16 needs a GPU"):
        check_precision(node, "cpu", "here")

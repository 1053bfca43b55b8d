from pathlib import Path

import pytest
import torch

from polymnesia.config.loader import validate
from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.models import ModelConfig
from polymnesia.models.build import build_model, count_parameters, load_model


class Tok:
    bos_token_id, eos_token_id, pad_token_id = 1, 2, 3

    def __len__(self) -> int:
        return 100


def test_preset_and_overrides_build_mistral():
    m = build_model(ModelConfig(preset="nano", num_hidden_layers=2), Tok())
    assert (
        m.config.hidden_size == 32
        and m.config.num_hidden_layers == 2
        and m.config.vocab_size == 100
    )
    # embeddings 100x32 + untied head 32x100 + 2 layers
    assert count_parameters(m) > 2 * 100 * 32


def test_unknown_preset_and_bad_heads():
    with pytest.raises(ConfigError, match="unknown model preset 'tinyy'"):
        validate(ModelConfig, {"preset": "tinyy"})
    # refused when the config is validated, not when the model is built
    with pytest.raises(ConfigError, match="not divisible by num_attention_heads"):
        validate(ModelConfig, {"preset": "nano", "num_attention_heads": 3})


def test_offline_hub_id_and_missing_folder(tmp_path: Path):
    with pytest.raises(PolymnesiaError, match="Hugging Face Hub is unreachable"):
        load_model("some-org/some-model")
    with pytest.raises(PolymnesiaError, match="model folder not found"):
        load_model(str(tmp_path / "nope"))


@pytest.mark.parametrize("arch", ["llama", "qwen2", "gpt2"])
def test_local_folder_loads_with_dtype_and_attention(arch: str, tmp_path: Path) -> None:
    """model.name_or_path may point at a folder the testing factory wrote; dtype and kernel
    apply.
    """
    from polymnesia.testing import save_tiny, tiny_bpe

    folder = save_tiny(tmp_path / arch, arch, tiny_bpe(vocab_size=300))
    cfg = ModelConfig(name_or_path=str(folder), dtype="bfloat16", attn_implementation="eager")
    model = build_model(cfg, None)
    assert model.config.model_type == arch
    assert next(model.parameters()).dtype == torch.bfloat16
    assert model.config._attn_implementation == "eager"
    sdpa = build_model(ModelConfig(name_or_path=str(folder), attn_implementation="sdpa"), None)
    assert (
        sdpa.config._attn_implementation == "sdpa"
        and next(sdpa.parameters()).dtype == torch.float32
    )


def test_unavailable_attention_kernel_is_one_line(tmp_path: Path) -> None:
    from polymnesia.testing import save_tiny, tiny_bpe

    folder = save_tiny(tmp_path / "m", "llama", tiny_bpe(vocab_size=300))
    cfg = ModelConfig(name_or_path=str(folder), attn_implementation="flash_attention_2")
    with pytest.raises(PolymnesiaError, match="attn_implementation='flash_attention_2'") as e:
        build_model(cfg, None)
    assert "\n" not in str(e.value)


@pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("flash_attn") is not None,
    reason="checks a machine without flash-attn",
)
def test_scratch_model_with_an_unavailable_kernel_is_one_line() -> None:
    cfg = ModelConfig(preset="nano", attn_implementation="flash_attention_2")
    with pytest.raises(PolymnesiaError, match="attn_implementation='flash_attention_2'") as e:
        build_model(cfg, Tok())
    assert "\n" not in str(e.value)


def test_attention_kernels_this_machine_cannot_run_are_named() -> None:
    from polymnesia.models.build import check_attention

    for kernel in (None, "sdpa", "eager"):
        check_attention(kernel, "cpu", "k")
    check_attention("flex_attention", "cuda", "k")
    with pytest.raises(
        ConfigError,
        match=r"^k=flex_attention needs an accelerator .* accepted here: sdpa, eager or null",
    ):
        check_attention("flex_attention", "cpu", "k")
    with pytest.raises(
        ConfigError, match="here the package is missing and there is no CUDA GPU"
    ) as e:
        check_attention("flash_attention_2", "cpu", "k")
    assert "flex_attention" not in str(e.value).split("accepted here:")[1]  # not on a CPU either
    if __import__("importlib.util").util.find_spec("flash_attn") is None:
        with pytest.raises(
            ConfigError,
            match=r"here the package is missing; accepted here: sdpa, eager, flex_attention",
        ):
            check_attention("flash_attention_2", "cuda", "k")


def test_scratch_model_takes_attention_kernel() -> None:
    m = build_model(ModelConfig(preset="nano", attn_implementation="eager"), Tok())
    assert m.config._attn_implementation == "eager"


def test_encoder_as_causal_lm_is_one_line(tmp_path: Path) -> None:
    from polymnesia.testing import save_tiny, tiny_bpe

    folder = save_tiny(tmp_path / "x", "xlm-roberta", tiny_bpe(vocab_size=300))
    with pytest.raises(
        PolymnesiaError, match=r"^causal language modelling cannot apply to .*xlm-roberta.*encoder"
    ) as e:
        load_model(folder)
    assert "\n" not in str(e.value)

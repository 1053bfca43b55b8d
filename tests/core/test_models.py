from pathlib import Path

import pytest

from polymnesia.config.loader import validate
from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.models import ModelConfig, build_model, count_parameters, load_model


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

import pytest
import torch

from polymnesia.errors import ConfigError
from polymnesia.models.lora import LoraConfig, add_adapter, check_rank, trainable_parameters


def _classifier() -> torch.nn.Module:
    from polymnesia.testing import tiny_model

    return tiny_model(
        "mistral",
        50,
        head="sequence",
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_labels=3,
        pad_token_id=0,
    )


def test_rank_larger_than_layer_width_is_one_line() -> None:
    model = _classifier()  # k_proj/v_proj: 32 -> 16 (2 kv heads x 8)
    check_rank(model, 16, LoraConfig())
    with pytest.raises(ConfigError) as e:
        check_rank(model, 17, LoraConfig())
    assert "larger than the width 16" in str(e.value) and "\n" not in str(e.value)


def test_adapter_trainable_count_by_hand() -> None:
    r = 4
    model = add_adapter(_classifier(), r, LoraConfig(), "sequence")
    # A: r x in, B: out x r for q (32->32), k (32->16), v (32->16), o (32->32); head 32 x 3
    lora = r * (32 + 32) + r * (32 + 16) * 2 + r * (32 + 32)
    assert trainable_parameters(model) == lora + 32 * 3
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert any("embed_tokens" in n for n in frozen)
    out = model(
        input_ids=torch.tensor([[1, 2, 3]]), attention_mask=torch.ones(1, 3, dtype=torch.long)
    )
    assert out.logits.shape == (1, 3)


def test_adding_an_adapter_raises_no_deprecation_warning_from_peft() -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        add_adapter(_classifier(), 2, LoraConfig(), "sequence")

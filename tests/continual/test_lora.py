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


def _lora_a(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_A" in n}


def test_a_seeded_adapter_does_not_depend_on_earlier_draws() -> None:
    """An instruction stage run after others in one process (inline) gets the adapter it
    gets alone (a child process): PEFT's draws come from a generator seeded with the seed."""
    base = _classifier()
    state = {k: v.clone() for k, v in base.state_dict().items()}
    adapters = []
    for earlier in (0, 1):
        torch.manual_seed(earlier)  # what the process drew before differs
        model = _classifier()
        model.load_state_dict(state)
        before = torch.random.get_rng_state()
        adapters.append(_lora_a(add_adapter(model, 4, LoraConfig(), "sequence", seed=7)))
        assert torch.equal(torch.random.get_rng_state(), before)  # the caller's state is kept
    assert adapters[0].keys() and adapters[0].keys() == adapters[1].keys()
    assert all(torch.equal(adapters[0][k], adapters[1][k]) for k in adapters[0])
    torch.manual_seed(0)
    other = _classifier()
    other.load_state_dict(state)
    unseeded = _lora_a(add_adapter(other, 4, LoraConfig(), "sequence"))
    assert not all(torch.equal(adapters[1][k], unseeded[k]) for k in unseeded)

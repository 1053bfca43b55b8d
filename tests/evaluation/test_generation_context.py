"""Generation keeps prompts inside the model's context: GPT-2's learned position table has no
row past ``n_positions``, so a longer prompt would be an index error, not a weak answer."""

from __future__ import annotations

import logging

import pytest

from polymnesia import testing
from polymnesia.errors import PolymnesiaError
from polymnesia.evaluation.generation import chat_prompt, context_length, greedy_generate


@pytest.fixture(scope="module")
def gpt2():  # type: ignore[no-untyped-def]
    tok = testing.tiny_bpe(testing.corpus(("en", "fr")), 300)
    ids = testing.special_ids(tok)
    model = testing.tiny_model("gpt2", len(tok), max_position_embeddings=64, **ids)
    return model, tok


def test_context_length_reads_gpt2_and_llama_configs(gpt2) -> None:  # type: ignore[no-untyped-def]
    assert context_length(gpt2[0]) == 64
    assert context_length(testing.tiny_model("llama", 50, max_position_embeddings=96)) == 96


def test_a_prompt_longer_than_the_context_keeps_its_end(gpt2, caplog) -> None:  # type: ignore[no-untyped-def]
    model, tok = gpt2
    long = chat_prompt("Repeat: " + "the cat sat on the mat " * 40)
    assert len(tok(long)["input_ids"]) > 64
    with caplog.at_level(logging.WARNING, logger="polymnesia.evaluation.generation"):
        out = greedy_generate(model, tok, [long, "the cat"], max_new_tokens=8)
    assert len(out) == 2
    assert "1 of 2 prompts are longer than 56 tokens" in caplog.text


def test_no_room_for_a_prompt_is_one_line(gpt2) -> None:  # type: ignore[no-untyped-def]
    model, tok = gpt2
    with pytest.raises(PolymnesiaError, match="leaves no room for a prompt"):
        greedy_generate(model, tok, ["hi"], max_new_tokens=64)

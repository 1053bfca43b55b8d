"""ChatML rendering and SFT label masking, checked by hand on a tiny tokenizer."""

from __future__ import annotations

import pytest

from polymnesia.errors import DataError
from polymnesia.tokenizers.chat import (
    IGNORE_INDEX,
    SYSTEM_PROMPT,
    build_sft_example,
    render_chatml,
    sft_messages,
)


def test_system_prompt_is_paper_appendix_c():
    assert SYSTEM_PROMPT.startswith("You are a large language model trained to solve multiple NLP")
    assert SYSTEM_PROMPT.endswith("factually correct and succinct.")


def test_render_chatml_exact_text():
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "Hi"}]
    expected = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    assert render_chatml(messages) == expected
    assert (
        render_chatml(messages, add_generation_prompt=True) == expected + "<|im_start|>assistant\n"
    )


def test_template_on_tokenizer_matches_render(base_tok):
    messages = sft_messages("Translate.", "Hola", system=SYSTEM_PROMPT)
    for gen in (False, True):
        rendered = base_tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=gen)
        assert rendered == render_chatml(messages, add_generation_prompt=gen)


def test_unknown_role_is_refused():
    with pytest.raises(DataError, match="role 'bot'"):
        render_chatml([{"role": "bot", "content": "x"}])


def test_user_turn_joins_instruction_and_input():
    assert sft_messages("Do it.", "", system=None) == [{"role": "user", "content": "Do it."}]
    assert sft_messages("Do it.", "now", system=None)[0]["content"] == "Do it.\n\nnow"


def test_labels_mask_everything_but_the_response(base_tok):
    ex = build_sft_example(
        base_tok, "Say hi.", None, "Hello there", system="Be brief.", max_length=512
    )
    prompt_text = (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nSay hi.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    prompt = [1, *base_tok(prompt_text)["input_ids"]]
    response = [*base_tok("Hello there")["input_ids"], 5, 2]  # + <|im_end|>, </s>
    assert ex["input_ids"] == prompt + response
    assert ex["labels"] == [IGNORE_INDEX] * len(prompt) + response
    kept = [t for t in ex["labels"] if t != IGNORE_INDEX]
    assert base_tok.decode(kept) == "Hello there<|im_end|></s>"


def test_truncation_cuts_the_response_end(base_tok):
    full = build_sft_example(base_tok, "Say hi.", "", "Hello there, friend", max_length=512)
    n_prompt = full["labels"].count(IGNORE_INDEX)
    short = build_sft_example(
        base_tok, "Say hi.", "", "Hello there, friend", max_length=n_prompt + 2
    )
    assert short["input_ids"] == full["input_ids"][: n_prompt + 2]
    assert short["labels"][-2:] == full["input_ids"][n_prompt : n_prompt + 2]


def test_prompt_longer_than_max_length_is_one_line(base_tok):
    with pytest.raises(DataError, match="leaves no room for the response") as err:
        build_sft_example(base_tok, "Say hi.", "", "Hello", max_length=10)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("output", [None, "", "   "])
def test_record_without_output_is_refused(base_tok, output):
    with pytest.raises(DataError, match="SFT record has no output"):
        build_sft_example(base_tok, "Say hi.", "", output)


def test_record_without_instruction_is_refused(base_tok):
    with pytest.raises(DataError, match="no instruction"):
        build_sft_example(base_tok, "", "", "Hello")

"""Evaluation helpers: word ids from offsets, the Figure 9 prompt, answer likelihoods."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from polymnesia.evaluation.generation import answer_logprobs, chat_prompt, greedy_generate
from polymnesia.evaluation.representations import contextual_vectors, token_word_ids
from polymnesia.stages.evaluate_translation import build_prompt
from polymnesia.tokenizers.chat import SYSTEM_PROMPT


def test_token_word_ids_by_offsets() -> None:
    text = "the cat  the"
    offsets = [(0, 3), (3, 5), (5, 7), (7, 8), (8, 12)]  # "the", " c", "at", " ", " the"
    vocab: dict[str, int] = {}
    assert token_word_ids(text, offsets, vocab) == [0, 1, 1, -1, 0]
    assert vocab == {"the": 0, "cat": 1}


def test_figure9_prompt() -> None:
    p = build_prompt([("Hi.", "Salut.")], "Bye.", "English", "French")
    assert p.startswith(
        "The task is to translate the given sentence in English to language French."
    )
    assert p.endswith("English: Hi.\nFrench: Salut.\n\nEnglish: Bye.\nFrench:")
    chat = chat_prompt(p)
    assert chat.startswith(f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n")
    assert chat.endswith("<|im_start|>assistant\n")


@pytest.fixture(scope="module")
def tok_model(make_tok_model):  # type: ignore[no-untyped-def]
    return make_tok_model(["the cat sat on the mat", "law history wisdom prophets"])


def test_answer_logprobs_match_manual_sum(tok_model) -> None:  # type: ignore[no-untyped-def]
    tok, model = tok_model
    prompt = chat_prompt("Which genre?", "the cat")
    lps = answer_logprobs(model, tok, prompt, ["law", "wisdom prophets"])
    head = [tok.bos_token_id] + tok(prompt, add_special_tokens=False)["input_ids"]
    for ans, lp in zip(["law", "wisdom prophets"], lps, strict=True):
        tail = tok(ans, add_special_tokens=False)["input_ids"] + [
            tok.convert_tokens_to_ids("<|im_end|>")
        ]
        ids = torch.tensor([head + tail])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0], -1)
        manual = sum(float(logp[len(head) - 1 + i, t]) for i, t in enumerate(tail))
        assert lp == pytest.approx(manual, abs=1e-4)


def test_greedy_generate_batched_equals_single(tok_model) -> None:  # type: ignore[no-untyped-def]
    tok, model = tok_model
    prompts = [
        chat_prompt("Continue:", "the cat"),
        chat_prompt("Continue this verse please:", "the mat sat"),
    ]
    batched = greedy_generate(model, tok, prompts, max_new_tokens=5, batch_size=2)
    single = [greedy_generate(model, tok, [p], max_new_tokens=5)[0] for p in prompts]
    assert batched == single


def test_contextual_vectors_shapes(tok_model) -> None:  # type: ignore[no-untyped-def]
    tok, model = tok_model
    tv = contextual_vectors(model, tok, ["the cat sat", "the mat"], max_length=32)
    assert tv.H.shape == (len(tv.word_ids), 16) and tv.H.dtype == np.float32
    assert set(tv.sent_ids.tolist()) == {0, 1}
    the = tv.word_ids[0]
    assert (tv.word_ids == the).sum() >= 2  # "the" in both sentences shares one word id

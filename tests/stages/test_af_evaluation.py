"""Evaluation helpers: word ids from offsets, the Figure 9 prompt, answer likelihoods."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from polymnesia.errors import PolymnesiaError
from polymnesia.evaluation.generation import answer_logprobs, chat_prompt, greedy_generate
from polymnesia.evaluation.representations import (
    contextual_vectors,
    pool_occurrences,
    token_spans,
    token_word_ids,
    token_word_pairs,
    word_spans,
)
from polymnesia.stages.evaluate_translation import build_prompt
from polymnesia.tokenizers.chat import SYSTEM_PROMPT


def test_token_word_ids_by_offsets() -> None:
    text = "the cat  the"
    offsets = [(0, 3), (3, 5), (5, 7), (7, 8), (8, 12)]  # "the", " c", "at", " ", " the"
    vocab: dict[str, int] = {}
    assert token_word_ids(text, offsets, vocab) == [0, 1, 1, -1, 0]
    assert vocab == {"the": 0, "cat": 1}
    assert token_spans(text, offsets)[0] == [0, 1, 1, -1, 2]  # occurrences, not types


def test_scripts_without_spaces_have_one_word_per_character() -> None:
    text = "神爱世人, 甚至 love"
    words = [text[a:b] for a, b in word_spans(text)]
    assert words == ["神", "爱", "世", "人", ",", "甚", "至", "love"]
    thai = "กิน ข้าว"  # combining vowel and tone marks stay with their base character
    assert [thai[a:b] for a, b in word_spans(thai)] == ["กิ", "น", "ข้", "า", "ว"]


def test_a_token_of_several_characters_belongs_to_each_of_them() -> None:
    text = "神爱世人 love"
    # tokens: "神爱" (two one-character words), "世", "人", " lo", "ve"
    offsets = [(0, 2), (2, 3), (3, 4), (4, 7), (7, 9)]
    pairs, words = token_word_pairs(text, offsets)
    assert words == ["神", "爱", "世", "人", "love"]
    assert pairs == [(0, 0), (0, 1), (1, 2), (2, 3), (3, 4), (4, 4)]
    # truncated after " lo": "love" is cut and left out; the characters are whole
    pairs, _ = token_word_pairs(text, offsets[:4])
    assert pairs == [(0, 0), (0, 1), (1, 2), (2, 3)]


def test_pool_occurrences_last_and_mean_by_hand() -> None:
    H = np.array([[1.0, 0.0], [2.0, 2.0], [4.0, 0.0], [9.0, 9.0], [0.0, 6.0]], dtype=np.float32)
    occ = [0, 1, 1, -1, 2]  # word 1 has two sub-tokens; the 4th token is only a space
    last, ids = pool_occurrences(H, occ, "last")
    np.testing.assert_array_equal(ids, [0, 1, 2])
    np.testing.assert_allclose(last, [[1, 0], [4, 0], [0, 6]])
    mean, _ = pool_occurrences(H, occ, "mean")
    np.testing.assert_allclose(mean, [[1, 0], [3, 1], [0, 6]])
    with pytest.raises(PolymnesiaError, match="pooling must be one of last, mean"):
        pool_occurrences(H, occ, "first")  # type: ignore[arg-type]


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


def test_contextual_vectors_one_row_per_word_occurrence(tok_model) -> None:  # type: ignore[no-untyped-def]
    tok, model = tok_model
    texts = ["the cat sat", "the mat"]
    tv = contextual_vectors(model, tok, texts, max_length=32)
    assert tv.H.shape == (5, 16) and tv.H.dtype == np.float32  # 3 + 2 words
    np.testing.assert_array_equal(tv.sent_ids, [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(tv.word_ids, [0, 1, 2, 0, 3])  # "the" shares one id
    assert tv.tokens >= 5
    # "last" pooling is the hidden state at each word's last sub-token
    enc = tok(texts[0], add_special_tokens=False, return_offsets_mapping=True)
    occ, _ = token_spans(texts[0], enc["offset_mapping"])
    last_pos = [max(i for i, o in enumerate(occ) if o == w) for w in range(3)]
    ids = torch.tensor([[tok.bos_token_id, *enc["input_ids"]]])
    with torch.no_grad():
        hidden = model(input_ids=ids, output_hidden_states=True).hidden_states[-1][0, 1:]
    np.testing.assert_allclose(tv.H[:3], hidden[last_pos].numpy(), atol=1e-5)
    mean = contextual_vectors(model, tok, texts, max_length=32, pooling="mean")
    first = [i for i, o in enumerate(occ) if o == 1]
    np.testing.assert_allclose(mean.H[1], hidden[first].mean(0).numpy(), atol=1e-5)


def test_contextual_vectors_drop_a_word_cut_by_truncation(tok_model) -> None:  # type: ignore[no-untyped-def]
    tok, model = tok_model
    text = "the cat sat on the mat"
    n = len(tok(text, add_special_tokens=False)["input_ids"])
    full = contextual_vectors(model, tok, [text], max_length=n + 1)
    assert len(full.H) == 6
    # one token fewer: "mat" loses its last (or only) sub-token, so it is dropped whole
    cut = contextual_vectors(model, tok, [text], max_length=n)
    np.testing.assert_array_equal(cut.word_ids, full.word_ids[:5])
    np.testing.assert_allclose(cut.H, full.H[:5], atol=1e-5)

"""Instruction examples in each model's own chat template: the loss covers assistant turns only."""

from __future__ import annotations

from typing import Any

import pytest

from polymnesia import testing
from polymnesia.errors import DataError
from polymnesia.evaluation.generation import chat_prompt, stop_ids
from polymnesia.tokenizers.chat import (
    CHATML_TEMPLATE,
    IGNORE_INDEX,
    assistant_spans,
    build_chat_example,
    build_sft_example,
    fold_system,
    has_chatml_tokens,
    render_prompt,
    sft_messages,
    turn_end,
    uses_chatml,
)

TEXTS = testing.corpus(("en", "fr"))
CONVERSATION = [
    {"role": "system", "content": "Answer briefly."},
    {"role": "user", "content": "Who has the right to life"},
    {"role": "assistant", "content": "Everyone has the right to life."},
    {"role": "user", "content": "And in french"},
    {"role": "assistant", "content": "Tout individu a droit à la vie."},
]
ANSWERS = [m["content"] for m in CONVERSATION if m["role"] == "assistant"]
PROMPTS = [m["content"] for m in CONVERSATION if m["role"] != "assistant"]


def chatml_bpe() -> Any:
    return testing.tiny_bpe(TEXTS, 400)


def llama3() -> Any:
    return testing.tiny_tiktoken_bpe(TEXTS, 400)


def mistral_inst() -> Any:
    return testing.tiny_sentencepiece(TEXTS, 400, "bpe", chat_template=testing.INST_TEMPLATE)[0]


def gemma_unigram() -> Any:
    tok, _ = testing.tiny_sentencepiece(TEXTS, 400, "unigram")
    tok.add_special_tokens({"additional_special_tokens": ["<start_of_turn>", "<end_of_turn>"]})
    tok.chat_template = testing.GEMMA_TEMPLATE
    return tok


def plain_unigram() -> Any:
    """No chat template and no ChatML tokens: ChatML as text."""
    tok, _ = testing.tiny_sentencepiece(TEXTS, 400, "unigram")
    tok.chat_template = None
    return tok


TOKENIZERS = {
    "chatml": chatml_bpe,
    "llama3": llama3,
    "mistral_inst": mistral_inst,
    "gemma": gemma_unigram,
    "none": plain_unigram,
}


@pytest.fixture(scope="module", params=list(TOKENIZERS))
def tok(request: pytest.FixtureRequest) -> Any:
    return TOKENIZERS[request.param]()


def labelled_runs(example: dict[str, list[int]]) -> list[list[int]]:
    """Maximal runs of labelled positions (one per assistant turn)."""
    runs: list[list[int]] = []
    prev = False
    for tid, label in zip(example["input_ids"], example["labels"], strict=True):
        on = label != IGNORE_INDEX
        if on:
            assert label == tid
            if not prev:
                runs.append([])
            runs[-1].append(tid)
        prev = on
    return runs


def test_multi_turn_loss_covers_assistant_turns_only(tok: Any) -> None:
    template = CHATML_TEMPLATE if tok.chat_template is None else None
    example = build_chat_example(tok, CONVERSATION, template=template)
    runs = labelled_runs(example)
    assert len(runs) == 2
    for run, answer in zip(runs, ANSWERS, strict=True):
        text = tok.decode(run, skip_special_tokens=True)
        assert answer in text and not any(p in text for p in PROMPTS)
    prompt_ids = [
        t for t, lab in zip(example["input_ids"], example["labels"], strict=True) if lab == -100
    ]
    prompt_text = tok.decode(prompt_ids, skip_special_tokens=True)
    assert all(p in prompt_text for p in PROMPTS[1:])
    assert not any(a in prompt_text for a in ANSWERS)


def test_prompt_tokens_are_what_generation_sees(tok: Any) -> None:
    """The unlabelled head of a one-turn example is the generation prompt's tokenization."""
    template = CHATML_TEMPLATE if tok.chat_template is None else None
    turn = CONVERSATION[:3]
    example = build_chat_example(tok, turn, template=template)
    first = example["labels"].index(next(x for x in example["labels"] if x != IGNORE_INDEX))
    text, spans = assistant_spans(tok, turn, template)
    prompt = tok(text[: spans[0][0]], add_special_tokens=False)["input_ids"]
    assert example["input_ids"][:first] == prompt[:first]
    assert len(prompt) - first <= 1  # at most a token merged across the boundary


def test_sft_records_use_the_models_template(tok: Any) -> None:
    example = build_sft_example(
        tok, "Translate to French.", "Everyone has rights.", "Tout individu."
    )
    runs = labelled_runs(example)
    assert len(runs) == 1 and "Tout individu." in tok.decode(runs[0], skip_special_tokens=True)
    if uses_chatml(tok) and has_chatml_tokens(tok):
        assert example["input_ids"][0] == tok.bos_token_id  # the ChatML path, as before


def test_truncation_that_leaves_no_answer_is_one_line() -> None:
    with pytest.raises(DataError, match="leaving no assistant token") as e:
        build_chat_example(llama3(), CONVERSATION[:3], max_length=5)
    assert "\n" not in str(e.value)


def test_template_that_refuses_is_one_line() -> None:
    tok = llama3()
    tok.chat_template = "{{ raise_exception('System role not supported') }}"
    with pytest.raises(DataError, match="refused the conversation: System role not supported"):
        build_chat_example(tok, CONVERSATION[:3])


def test_generation_prompt_matches_training_prompt(tok: Any) -> None:
    from polymnesia.tokenizers.chat import render_prompt

    turn = CONVERSATION[:2]
    if tok.chat_template is None:
        pytest.skip("ChatML-as-text: render_chatml, covered by test_tokenizers_chat")
    text, spans = assistant_spans(tok, [*turn, {"role": "assistant", "content": "Yes."}])
    assert render_prompt(tok, turn) == text[: spans[0][0]]


#: the end-of-turn marker each template writes after an assistant answer
TURN_ENDS = {
    "chatml": "<|im_end|>",
    "llama3": "<|eot_id|>",
    "mistral_inst": "</s>",
    "gemma": "<end_of_turn>",
    "none": "<|im_end|>",
}


def test_turn_end_is_the_marker_the_template_writes_after_an_answer() -> None:
    for name, make in TOKENIZERS.items():
        assert turn_end(make()) == TURN_ENDS[name], name


def test_evaluation_prompt_is_the_training_prompt_in_every_template(tok: Any) -> None:
    """The prompt evaluation generates after is exactly the text training put before the
    answer, so a model tuned in its template is asked in it (the answer follows directly)."""
    messages = sft_messages("Who has the right to life", None)
    prompt = chat_prompt("Who has the right to life", tokenizer=tok)
    assert prompt == render_prompt(tok, messages)
    if uses_chatml(tok):
        assert prompt == chat_prompt("Who has the right to life")  # ChatML, as SFT writes it
        assert prompt.endswith("<|im_start|>assistant\n")
        return
    convo = [*messages, {"role": "assistant", "content": "Everyone has the right to life."}]
    try:
        text, spans = assistant_spans(tok, convo)
    except DataError:  # a template that refuses the system turn: folded into the user turn
        text, spans = assistant_spans(tok, fold_system(convo))
    assert text[: spans[0][0]] == prompt


def test_generation_stops_at_the_templates_end_of_turn() -> None:
    tok = gemma_unigram()
    assert tok.convert_tokens_to_ids("<end_of_turn>") in stop_ids(tok)
    assert tok.eos_token_id in stop_ids(tok)


#: Gemma's own template refuses a system turn outright
STRICT_GEMMA = (
    "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}" + testing.GEMMA_TEMPLATE
)


def test_a_template_that_refuses_the_system_turn_gets_it_in_the_user_turn() -> None:
    tok = gemma_unigram()
    tok.chat_template = STRICT_GEMMA
    example = build_sft_example(tok, "Who has the right to life", None, "Everyone.")
    assert any(x != IGNORE_INDEX for x in example["labels"])
    prompt = chat_prompt("Who has the right to life", tokenizer=tok)
    assert prompt.startswith(f"{tok.bos_token}<start_of_turn>user\nYou are a large language model")
    assert prompt.endswith("<start_of_turn>model\n")
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    assert example["input_ids"][: len(ids)] == ids  # trained after exactly this prompt

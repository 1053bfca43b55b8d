"""ChatML prompts and supervised fine-tuning (SFT) examples.

Aggarwal et al. 2024 instruction-tunes on English-only data
(OpenOrca) and evaluates with ChatML prompts whose system turn is the text in
its appendix C (Figures 4-9), kept here as :data:`SYSTEM_PROMPT`.

Format (standard ChatML)::

    <|im_start|>system\\n{system}<|im_end|>\\n
    <|im_start|>user\\n{instruction}\\n\\n{input}<|im_end|>\\n
    <|im_start|>assistant\\n{output}<|im_end|></s>

A model that brings its own chat template (Llama-3, Mistral-instruct, Qwen2,
Gemma, ...) is trained in *its* format: :func:`build_sft_example` then goes
through :func:`build_chat_example`, which renders with
``tokenizer.apply_chat_template`` and marks the assistant turns. A tokenizer
without a template, or with polymnesia's ChatML one, uses ChatML as above.

Departure from the paper's figures: they show a line break before
``<|im_end|>`` and a blank line after ``user``; those are artefacts of how the
prompts were typeset and vary between figures, so we use the standard ChatML
spacing above (no newline before ``<|im_end|>``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from transformers import PreTrainedTokenizerFast

from polymnesia.errors import ConfigError, DataError
from polymnesia.tokenizers.bpe import encode_document
from polymnesia.tokenizers.special import CHATML_TEMPLATE, IM_END, IM_START

#: System prompt of Aggarwal et al. 2024, appendix C (identical in Figures 4-9).
SYSTEM_PROMPT = (
    "You are a large language model trained to solve multiple NLP tasks accurately. "
    "For any given NLP task, you must produce an output that is factually correct and succinct."
)

IGNORE_INDEX = -100


class TemplateRefused(DataError):
    """A chat template raised on the conversation (Gemma's refuses a system turn)."""


_ROLES = ("system", "user", "assistant")


def render_chatml(
    messages: Sequence[Mapping[str, str]], *, add_generation_prompt: bool = False
) -> str:
    """Render ``[{"role": ..., "content": ...}, ...]`` as ChatML text (see module docstring)."""
    parts = []
    for i, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role not in _ROLES:
            raise DataError(f"chat message {i} has role {role!r}; accepted: {', '.join(_ROLES)}")
        if not isinstance(content, str):
            raise DataError(f"chat message {i} ({role}) has no text content")
        parts.append(f"{IM_START}{role}\n{content}{IM_END}\n")
    if add_generation_prompt:
        parts.append(f"{IM_START}assistant\n")
    return "".join(parts)


def sft_messages(
    instruction: str, input: str | None = None, system: str | None = SYSTEM_PROMPT
) -> list[dict[str, str]]:
    """System and user turns for one instruction record (``input`` follows a blank line)."""
    if not isinstance(instruction, str) or not instruction.strip():
        raise DataError("SFT record has no instruction; every record needs a non-empty instruction")
    user = instruction if not input else f"{instruction}\n\n{input}"
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": user})
    return messages


def build_sft_example(
    tokenizer: PreTrainedTokenizerFast,
    instruction: str,
    input: str | None,
    output: str | None,
    system: str | None = SYSTEM_PROMPT,
    max_length: int = 2048,
) -> dict[str, list[int]]:
    """Token ids and labels of one SFT example; the loss counts response tokens only.

    ``input_ids = [BOS] + prompt + response + [<|im_end|>, EOS]`` where the
    prompt is the ChatML system and user turns plus ``<|im_start|>assistant\\n``.
    ``labels`` equal ``input_ids`` on the response, ``<|im_end|>`` and EOS and
    are -100 elsewhere (unshifted: the model shifts them, as in transformers).
    Prompt and response are tokenized separately, exactly as at generation
    time, so no BPE token straddles the boundary. A tokenizer with its own
    (non-ChatML) chat template goes through :func:`build_chat_example`. Longer than ``max_length``:
    the response is cut at the end (losing its EOS); if the prompt alone leaves
    no room for a response token, :class:`DataError` is raised.
    """
    if output is None or not isinstance(output, str) or not output.strip():
        raise DataError(
            "SFT record has no output; every record needs a non-empty output (response)"
        )
    if max_length < 2:
        raise ConfigError(f"max_length must be >= 2, got {max_length}")
    if not uses_chatml(tokenizer) or not has_chatml_tokens(tokenizer):
        messages = sft_messages(instruction, input, system)
        messages.append({"role": "assistant", "content": output})
        template = None if not uses_chatml(tokenizer) else CHATML_TEMPLATE
        try:
            return build_chat_example(tokenizer, messages, max_length, template=template)
        except TemplateRefused:
            if messages[0]["role"] != "system":
                raise
            return build_chat_example(
                tokenizer, fold_system(messages), max_length, template=template
            )
    prompt_text = render_chatml(
        sft_messages(instruction, input, system), add_generation_prompt=True
    )
    prompt = encode_document(tokenizer, prompt_text, add_bos=True, add_eos=False)
    response = encode_document(tokenizer, output, add_bos=False, add_eos=False)
    response.append(_token_id(tokenizer, IM_END))
    response.append(_token_id(tokenizer, tokenizer.eos_token or "EOS"))
    if len(prompt) >= max_length:
        raise DataError(
            f"SFT prompt is {len(prompt)} tokens, which leaves no room for the response "
            f"within max_length={max_length}; raise max_length, or set too_long: drop in the "
            "instruction section to leave such records out"
        )
    response = response[: max_length - len(prompt)]
    return {
        "input_ids": prompt + response,
        "labels": [IGNORE_INDEX] * len(prompt) + response,
    }


def _token_id(tokenizer: PreTrainedTokenizerFast, token: str) -> int:
    token_id = tokenizer.convert_tokens_to_ids(token)
    if not isinstance(token_id, int) or token_id == tokenizer.unk_token_id:
        raise ConfigError(f"tokenizer has no {token} token; ChatML needs {IM_START} and {IM_END}")
    return token_id


def uses_chatml(tokenizer: Any) -> bool:
    """True when the tokenizer has no chat template of its own, or polymnesia's ChatML one."""
    template = getattr(tokenizer, "chat_template", None)
    return template is None or template == CHATML_TEMPLATE


def has_chatml_tokens(tokenizer: Any) -> bool:
    """Whether ``<|im_start|>`` and ``<|im_end|>`` are single tokens of the vocabulary."""
    vocab = tokenizer.get_vocab()
    return IM_START in vocab and IM_END in vocab


def _render(
    tokenizer: Any,
    messages: Sequence[Mapping[str, str]],
    generation: bool,
    template: str | None = None,
) -> str:
    try:
        text = tokenizer.apply_chat_template(
            list(messages),
            tokenize=False,
            add_generation_prompt=generation,
            chat_template=template,
        )
    except Exception as e:  # jinja2 TemplateError and friends: the template refused the turns
        raise TemplateRefused(
            f"the chat template of {type(tokenizer).__name__} refused the conversation: "
            f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}"
        ) from None
    return str(text)


def assistant_spans(
    tokenizer: Any, messages: Sequence[Mapping[str, str]], template: str | None = None
) -> tuple[str, list[tuple[int, int]]]:
    """The rendered conversation and the character spans of its assistant turns.

    Turn k spans from the end of the rendering of ``messages[:k]`` with the
    generation prompt to the end of the rendering of ``messages[:k+1]``: what
    the model must produce after being prompted, end-of-turn markers included.
    A template that does not render conversations incrementally (the shorter
    renderings are not prefixes of the full one) is refused in one line.
    """
    full = _render(tokenizer, messages, False, template)
    spans = []
    for k, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        prompt = _render(tokenizer, messages[:k], True, template) if k else ""
        upto = _render(tokenizer, messages[: k + 1], False, template)
        if not (full.startswith(prompt) and full.startswith(upto) and len(upto) > len(prompt)):
            raise DataError(
                f"the chat template of {type(tokenizer).__name__} does not render turn {k} "
                "as a prefix of the conversation, so the assistant tokens cannot be marked"
            )
        spans.append((len(prompt), len(upto)))
    if not spans:
        raise DataError("the conversation has no assistant turn to train on")
    return full, spans


def build_chat_example(
    tokenizer: Any,
    messages: Sequence[Mapping[str, str]],
    max_length: int = 2048,
    *,
    template: str | None = None,
) -> dict[str, list[int]]:
    """Token ids and labels of a conversation rendered by the model's own chat template.

    The rendered text (BOS and markers as the template writes them) is
    tokenized once; ``labels`` equal ``input_ids`` on the tokens that start
    inside an assistant turn (:func:`assistant_spans`) and are -100 elsewhere,
    so the loss covers the assistant turns only. ``template`` overrides the
    tokenizer's own (ChatML for a tokenizer that has none and no ChatML
    tokens: the markers are then ordinary text). Longer than ``max_length``:
    cut at the end; a cut that leaves no assistant token is a :class:`DataError`.
    """
    if max_length < 2:
        raise ConfigError(f"max_length must be >= 2, got {max_length}")
    text, spans = assistant_spans(tokenizer, messages, template)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = list(enc["input_ids"])[:max_length]
    offsets = list(enc["offset_mapping"])[:max_length]
    labels = [
        tid if any(a <= start < b for a, b in spans) else IGNORE_INDEX
        for tid, (start, _) in zip(ids, offsets, strict=True)
    ]
    if all(x == IGNORE_INDEX for x in labels):
        raise DataError(
            f"the conversation's prompt fills max_length={max_length} tokens, leaving no "
            "assistant token to train on; raise max_length or drop the record"
        )
    return {"input_ids": ids, "labels": labels}


def render_prompt(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> str:
    """The generation prompt for ``messages`` in the format the model was instruction-tuned in.

    The tokenizer's own template (with the generation prompt) when it has one,
    ChatML (:func:`render_chatml`) otherwise: the same choice as
    :func:`build_sft_example`, so evaluation prompts match training examples.
    A template that refuses a system turn (Gemma's) gets the system text at the
    head of the first user turn instead, as :func:`build_sft_example` trains it.
    """
    if uses_chatml(tokenizer):
        return render_chatml(messages, add_generation_prompt=True)
    try:
        return _render(tokenizer, messages, True)
    except TemplateRefused:
        if not messages or messages[0].get("role") != "system":
            raise
        return _render(tokenizer, fold_system(messages), True)


def fold_system(messages: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """The system turn moved to the head of the first user turn (blank line between)."""
    system, rest = messages[0]["content"], [dict(m) for m in messages[1:]]
    if rest and rest[0].get("role") == "user":
        rest[0]["content"] = f"{system}\n\n{rest[0]['content']}"
    return rest


_SENTINEL = "POLYMNESIAANSWERSENTINEL"


def turn_end(tokenizer: Any) -> str:
    """What the model writes to end its answer: ``<|im_end|>`` in ChatML, else the text its
    own template puts after an assistant turn (``<|eot_id|>``, ``<end_of_turn>``, ``</s>``
    ...), else its EOS token. Evaluation stops generation there and scores answers up to it."""
    if uses_chatml(tokenizer):
        return IM_END
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": _SENTINEL}]
    text = _render(tokenizer, messages, False)
    at = text.find(_SENTINEL)
    tail = text[at + len(_SENTINEL) :].strip() if at >= 0 else ""
    return tail or str(tokenizer.eos_token or "")

"""ChatML prompts and supervised fine-tuning (SFT) examples.

Paper 000 (Aggarwal et al. 2024) instruction-tunes on English-only data
(OpenOrca) and evaluates with ChatML prompts whose system turn is the text in
its appendix C (Figures 4-9), kept here as :data:`SYSTEM_PROMPT`.

Format (standard ChatML)::

    <|im_start|>system\\n{system}<|im_end|>\\n
    <|im_start|>user\\n{instruction}\\n\\n{input}<|im_end|>\\n
    <|im_start|>assistant\\n{output}<|im_end|></s>

Departure from the paper's figures: they show a line break before
``<|im_end|>`` and a blank line after ``user``; those are artefacts of how the
prompts were typeset and vary between figures, so we use the standard ChatML
spacing above (no newline before ``<|im_end|>``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from transformers import PreTrainedTokenizerFast

from polymnesia.errors import ConfigError, DataError
from polymnesia.tokenizers.bpe import encode_document
from polymnesia.tokenizers.special import IM_END, IM_START

#: System prompt of paper 000, appendix C (identical in Figures 4-9).
SYSTEM_PROMPT = (
    "You are a large language model trained to solve multiple NLP tasks accurately. "
    "For any given NLP task, you must produce an output that is factually correct and succinct."
)

IGNORE_INDEX = -100
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
    time, so no BPE token straddles the boundary. Longer than ``max_length``:
    the response is cut at the end (losing its EOS); if the prompt alone leaves
    no room for a response token, :class:`DataError` is raised.
    """
    if output is None or not isinstance(output, str) or not output.strip():
        raise DataError(
            "SFT record has no output; every record needs a non-empty output (response)"
        )
    if max_length < 2:
        raise ConfigError(f"max_length must be >= 2, got {max_length}")
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
            f"within max_length={max_length}; raise max_length or drop the record"
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

"""Prompted greedy generation and answer scoring in the model's chat format (Aggarwal et al. 2024,
appendix C: ChatML, the format polymnesia's instruction tuning uses when a tokenizer has no
template of its own; a model with its own chat template is prompted in it, and its end-of-turn
marker takes ``<|im_end|>``'s place below: :func:`polymnesia.tokenizers.chat.turn_end`).

* :func:`greedy_generate`: prompts sorted by length and cut into left-padded
  batches, decoded greedily with the key/value cache (``do_sample=False``);
  each sequence stops at ``<|im_end|>`` or EOS (finished rows are padded
  until the whole batch is done); returns the decoded continuations in input
  order.
* :func:`answer_logprobs`: the summed log-probability of each candidate answer
  (followed by ``<|im_end|>``) after a prompt, all candidates in one batched
  pass on the prompt's cache: zero-shot classification by likelihood, as
  multiple-choice benchmarks are scored in lm-evaluation-harness.
  :func:`answer_logprobs_many` does it for many prompts, sharded over processes.

Both take an optional :class:`~polymnesia.runtime.Runtime`: its process
shard of the prompts is run and the results gathered back in input order.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch
import torch.nn.functional as F

from polymnesia.errors import PolymnesiaError
from polymnesia.runtime import Runtime
from polymnesia.tokenizers.chat import (
    SYSTEM_PROMPT,
    render_chatml,
    render_prompt,
    sft_messages,
    turn_end,
)

log = logging.getLogger(__name__)


def chat_prompt(instruction: str, input: str = "", tokenizer: Any = None) -> str:
    """System turn (appendix C) + user turn + the assistant's generation prompt: ChatML
    (``<|im_start|>assistant\\n``), or with a ``tokenizer`` that has a chat template of its
    own, that template's rendering (as its instruction tuning saw it)."""
    messages = sft_messages(instruction, input or None, SYSTEM_PROMPT)
    if tokenizer is None:
        return render_chatml(messages, add_generation_prompt=True)
    return render_prompt(tokenizer, messages)


def _encode_prompt(tokenizer: Any, prompt: str) -> list[int]:
    """Prompt ids with BOS in front, unless the template already wrote it."""
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    bos, bos_text = tokenizer.bos_token_id, tokenizer.bos_token
    if bos is None or (bos_text and prompt.startswith(bos_text)):
        return list(ids)
    return [bos, *ids]


def context_length(model: torch.nn.Module) -> int | None:
    """Positions the model can attend over (``max_position_embeddings``, GPT-2's
    ``n_positions``).
    """
    config = getattr(model, "config", None)
    for key in ("max_position_embeddings", "n_positions"):
        value = getattr(config, key, None)
        if isinstance(value, int) and value > 0:
            return value
    return None


def stop_ids(tokenizer: Any) -> list[int]:
    """Token ids that end an answer: the end-of-turn marker (when it is one token) and EOS."""
    end = turn_end(tokenizer)
    ids = tokenizer(end, add_special_tokens=False)["input_ids"] if end else []
    out = [int(ids[0])] if len(ids) == 1 else []
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in out:
        out.append(int(tokenizer.eos_token_id))
    return out


def _left_padded(seqs: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for r, s in enumerate(seqs):
        ids[r, width - len(s) :], mask[r, width - len(s) :] = torch.tensor(list(s)), 1
    return ids, mask


@runtime_checkable
class Generates(Protocol):
    """A transformers model with ``generate`` (a PEFT model forwards it)."""

    def generate(self, *args: Any, **kwargs: Any) -> Any: ...


@torch.inference_mode()
def greedy_generate(
    model: torch.nn.Module,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int = 64,
    batch_size: int = 8,
    max_prompt_tokens: int | None = None,
    runtime: Runtime | None = None,
) -> list[str]:
    """Greedy continuations of ``prompts`` (in input order), stopped at the end-of-turn marker
    (``<|im_end|>`` in ChatML) or EOS."""
    if not isinstance(model, Generates):
        raise PolymnesiaError(f"{type(model).__name__} cannot generate text (no generate method)")
    rt = runtime or Runtime(device=next(model.parameters()).device)
    model.eval()
    stop = stop_ids(tokenizer)
    mine = rt.shard(prompts)
    seqs = [_encode_prompt(tokenizer, p) for p in mine]
    room = context_length(model)
    if room is not None:  # learned position tables (GPT-2) cannot index past their end
        room -= max_new_tokens
        cap = min(max_prompt_tokens or room, room)
        if cap < 1:
            raise PolymnesiaError(
                f"max_new_tokens={max_new_tokens} leaves no room for a prompt in the model's "
                f"context of {room + max_new_tokens} positions"
            )
        cut = sum(len(s) > cap for s in seqs)
        if cut:
            log.warning(
                "%d of %d prompts are longer than %d tokens (context %d minus %d new tokens): "
                "their beginnings are cut",
                cut,
                len(seqs),
                cap,
                room + max_new_tokens,
                max_new_tokens,
            )
        max_prompt_tokens = cap
    if max_prompt_tokens:
        seqs = [s[-max_prompt_tokens:] for s in seqs]
    order = sorted(range(len(seqs)), key=lambda i: -len(seqs[i]))  # similar lengths together
    out: list[str] = [""] * len(seqs)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        ids, mask = _left_padded([seqs[i] for i in idx], tokenizer.pad_token_id)
        gen = model.generate(
            input_ids=ids.to(rt.device),
            attention_mask=mask.to(rt.device),
            do_sample=False,
            max_new_tokens=max_new_tokens,
            eos_token_id=stop,
            pad_token_id=tokenizer.pad_token_id,
            use_cache=True,
        )
        for i, row in zip(idx, gen[:, ids.shape[1] :].tolist(), strict=True):
            cut = next((j for j, t in enumerate(row) if t in stop), len(row))
            out[i] = tokenizer.decode(row[:cut], skip_special_tokens=True).strip()
    return rt.gather(out, len(prompts))


def answer_tails(tokenizer: Any, answers: Sequence[str]) -> list[list[int]]:
    """Each candidate's token ids followed by the end-of-turn marker's (tokenized once per set
    of answers, not once per prompt)."""
    end = list(tokenizer(turn_end(tokenizer), add_special_tokens=False)["input_ids"])
    return [list(tokenizer(a, add_special_tokens=False)["input_ids"]) + end for a in answers]


@torch.inference_mode()
def answer_logprobs(
    model: torch.nn.Module,
    tokenizer: Any,
    prompt: str,
    answers: Sequence[str],
    tails: list[list[int]] | None = None,
) -> list[float]:
    """Summed log p(answer + end-of-turn marker | prompt) for each candidate (``<|im_end|>`` in
    ChatML; :func:`polymnesia.tokenizers.chat.turn_end`).

    The prompt runs once; its key/value cache is repeated for the candidates,
    whose tokens (right-padded) run in one batch on top of it.
    """
    model.eval()
    device = next(model.parameters()).device
    head = _encode_prompt(tokenizer, prompt)
    tails = tails or answer_tails(tokenizer, answers)
    first = model(input_ids=torch.tensor([head], device=device), use_cache=True)
    last = F.log_softmax(first.logits[0, -1].float(), -1)
    cache = first.past_key_values
    cache.batch_repeat_interleave(len(tails))
    width = max(len(t) for t in tails)
    ids = torch.full((len(tails), width), tokenizer.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(tails), len(head) + width), dtype=torch.long)
    mask[:, : len(head)] = 1
    for r, t in enumerate(tails):
        ids[r, : len(t)], mask[r, len(head) : len(head) + len(t)] = torch.tensor(t), 1
    logits = model(
        input_ids=ids.to(device), attention_mask=mask.to(device), past_key_values=cache
    ).logits
    logp = F.log_softmax(logits.float(), -1)
    targets = ids[:, 1:].to(device)  # token i+1 is predicted at position i
    picked = logp[:, :-1].gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    picked = picked * mask[:, len(head) + 1 :].to(device)
    first_tok = last[torch.tensor([t[0] for t in tails], device=device)]
    return (first_tok + picked.sum(-1)).tolist()


def answer_logprobs_many(
    model: torch.nn.Module,
    tokenizer: Any,
    prompts: Sequence[str],
    answers: Sequence[str],
    *,
    runtime: Runtime | None = None,
) -> list[list[float]]:
    """:func:`answer_logprobs` of every prompt (rows in input order), sharded over processes."""
    rt = runtime or Runtime(device=next(model.parameters()).device)
    tails = answer_tails(tokenizer, answers)
    mine = [answer_logprobs(model, tokenizer, p, answers, tails) for p in rt.shard(prompts)]
    return rt.gather(mine, len(prompts))

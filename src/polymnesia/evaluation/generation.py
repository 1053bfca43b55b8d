"""Prompted greedy generation and answer scoring with ChatML (paper 000, appendix C).

* :func:`greedy_generate`: left-padded batches, ``do_sample=False``, stops at
  ``<|im_end|>`` or EOS; returns the decoded continuations.
* :func:`answer_logprobs`: the summed log-probability of each candidate answer
  (followed by ``<|im_end|>``) after a prompt: zero-shot classification by
  likelihood, as multiple-choice benchmarks are scored in lm-evaluation-harness.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from polymnesia.data.prepared import read_split
from polymnesia.tokenizers.bpe import IM_END
from polymnesia.tokenizers.chat import SYSTEM_PROMPT, render_chatml, sft_messages


def chat_prompt(instruction: str, input: str = "") -> str:
    """System turn (appendix C) + user turn + ``<|im_start|>assistant\\n``."""
    return render_chatml(
        sft_messages(instruction, input or None, SYSTEM_PROMPT), add_generation_prompt=True
    )


def _encode_prompt(tokenizer: Any, prompt: str) -> list[int]:
    ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    return ([tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []) + list(ids)


@torch.no_grad()
def greedy_generate(
    model: torch.nn.Module,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int = 64,
    batch_size: int = 8,
    max_prompt_tokens: int | None = None,
) -> list[str]:
    model.eval()
    device = next(model.parameters()).device
    stop = [tokenizer.convert_tokens_to_ids(IM_END), tokenizer.eos_token_id]
    out: list[str] = []
    for start in range(0, len(prompts), batch_size):
        seqs = [_encode_prompt(tokenizer, p) for p in prompts[start : start + batch_size]]
        if max_prompt_tokens:
            seqs = [s[-max_prompt_tokens:] for s in seqs]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for r, s in enumerate(seqs):  # left padding
            ids[r, width - len(s) :], mask[r, width - len(s) :] = torch.tensor(s), 1
        gen = model.generate(  # type: ignore[operator]
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            do_sample=False,
            max_new_tokens=max_new_tokens,
            eos_token_id=stop,
            pad_token_id=tokenizer.pad_token_id,
        )
        for row in gen[:, width:].tolist():
            cut = next((i for i, t in enumerate(row) if t in stop), len(row))
            out.append(tokenizer.decode(row[:cut], skip_special_tokens=True).strip())
    return out


@torch.no_grad()
def answer_logprobs(
    model: torch.nn.Module, tokenizer: Any, prompt: str, answers: Sequence[str]
) -> list[float]:
    """Summed log p(answer + <|im_end|> | prompt) for each candidate.

    The prompt runs once; its key/value cache is repeated for the candidates,
    whose tokens (right-padded) run in one batch on top of it.
    """
    model.eval()
    device = next(model.parameters()).device
    head = _encode_prompt(tokenizer, prompt)
    end = tokenizer.convert_tokens_to_ids(IM_END)
    tails = [list(tokenizer(a, add_special_tokens=False)["input_ids"]) + [end] for a in answers]
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
    out = []
    for r, t in enumerate(tails):
        rest = sum(float(logp[r, i - 1, t[i]]) for i in range(1, len(t)))
        out.append(float(last[t[0]]) + rest)
    return out


def sample_aligned(
    data_dir: Any, langs: Sequence[str], split: str, n: int | None, seed: int = 0
) -> dict[str, list[dict[str, Any]]]:
    """Records of ``split`` whose aligned id exists in every language of ``langs``.

    The same ``n`` ids (drawn with ``seed`` from the common ids, in id order
    otherwise books would be over-represented) for every language, so scores
    compare languages on translations of the same verses.
    """
    import random

    by_lang = {lang: {r["id"]: r for r in read_split(data_dir, lang, split)} for lang in langs}
    common = sorted(set.intersection(*(set(v) for v in by_lang.values())))
    if n is not None and n < len(common):
        common = sorted(random.Random(seed).sample(common, n))
    return {lang: [by_lang[lang][i] for i in common] for lang in langs}

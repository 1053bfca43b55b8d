"""Merge a new byte-level BPE vocabulary into a base one (vocabulary expansion).

Aggarwal et al. 2024, section 3: a vocabulary V^L learned on the
adapting languages is merged with the base vocabulary V into V_merged
(32,000 + 16,000 = 48,000 in appendix A); the embeddings of
V_merged - V are then trained with the rest of the model frozen.

How the merge works (on the ``tokenizer.json`` of both tokenizers):

* Every base token keeps its id; the base's special tokens, normaliser,
  pre-tokeniser, decoder and settings are kept. The new tokenizer's
  special tokens and pipeline are ignored.
* New tokens not in the base are appended in the new tokenizer's id order
  (for a trained BPE this is merge-rank order), at most ``max_new_tokens``.
* Byte-level BPE needs merge rules, not just a token list: a token is only
  ever produced by applying a merge (a, b) -> ab. A new token is added only
  if it is a base symbol of the new tokenizer (no merge makes it) or one of
  the merges producing it has both parts already in the merged vocabulary;
  otherwise it is DROPPED (counted in :attr:`MergeReport.dropped`). With a
  trained BPE, parts always precede their result, so a prefix in id order
  never drops anything.
* The new tokenizer's merges are appended after all base merges, in the new
  tokenizer's rank order, keeping those not in the base whose two parts and
  result are all in the merged vocabulary (results may be base tokens too:
  the new tokenizer may build a base token along another path, and later
  new merges need it). Merges that would produce a special token are never
  added.

Base-language text: BPE applies the lowest-ranked merge first, so a word is
first merged exactly as by the base tokenizer; only if an appended merge
then matches two adjacent pieces does the result differ (it gets shorter).
So base tokenization is unchanged unless the new vocabulary learned a merge
of base pieces that the base did not; tests check that it is unchanged for
languages whose script the new vocabulary does not cover. The converse cost:
on some words a new token is never reached because a base merge takes one of
its pieces first (base a+b beats new a+bc, so "abc" stays ["ab", "c"]); such
tokens are simply seen less often in training.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer
from transformers import AutoTokenizer, PreTrainedTokenizerFast

from polymnesia.errors import ConfigError, PolymnesiaError

Merge = tuple[str, str]


@dataclass(frozen=True)
class MergeReport:
    """Sizes of a vocabulary merge (``len()`` of each tokenizer)."""

    base_size: int
    new_size: int
    added: int
    merged_size: int
    dropped: int = 0
    merges_added: int = 0
    first_new_id: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def new_token_ids(report: MergeReport) -> range:
    """Ids of the tokens appended by the merge (the rows to train in Aggarwal et al. 2024)."""
    return range(report.first_new_id, report.first_new_id + report.added)


def merge_tokenizers(
    base: PreTrainedTokenizerFast,
    new: PreTrainedTokenizerFast,
    *,
    max_new_tokens: int | None = None,
) -> tuple[PreTrainedTokenizerFast, MergeReport]:
    """Return ``base`` extended with the tokens and merges of ``new``, and a report."""
    if max_new_tokens is not None and max_new_tokens < 0:
        raise ConfigError(f"max_new_tokens must be >= 0 or None, got {max_new_tokens}")
    base_json = json.loads(base.backend_tokenizer.to_str())
    new_json = json.loads(new.backend_tokenizer.to_str())
    merged_json, added, dropped, n_merges, first_id = merge_tokenizer_json(
        base_json, new_json, max_new_tokens
    )
    merged = _rebuild_like(base, merged_json)
    report = MergeReport(
        base_size=len(base),
        new_size=len(new),
        added=added,
        merged_size=len(merged),
        dropped=dropped,
        merges_added=n_merges,
        first_new_id=first_id,
    )
    return merged, report


def merge_tokenizer_json(
    base: dict[str, Any], new: dict[str, Any], max_new_tokens: int | None = None
) -> tuple[dict[str, Any], int, int, int, int]:
    """Pure merge of two ``tokenizer.json`` dicts.

    Returns (merged json, tokens added, tokens dropped, merges added, first new id).
    """
    _check_byte_level_bpe(base, "base")
    _check_byte_level_bpe(new, "new")
    base_vocab: dict[str, int] = base["model"]["vocab"]
    base_special = {t["content"] for t in base.get("added_tokens", [])}
    new_special = {t["content"] for t in new.get("added_tokens", [])}
    candidates = [
        tok
        for tok, _ in sorted(new["model"]["vocab"].items(), key=lambda kv: kv[1])
        if tok not in new_special
    ]
    _check_collisions(candidates, base_special)
    new_merges = _parse_merges(new["model"]["merges"])
    added, dropped = _choose_tokens(candidates, base_vocab, new_merges, max_new_tokens)
    first_id = _next_id(base)
    vocab = dict(base_vocab)
    vocab.update({tok: first_id + i for i, tok in enumerate(added)})
    base_merges = _parse_merges(base["model"]["merges"])
    extra = _closed_merges(new_merges, set(base_merges), vocab, base_special)
    merged = json.loads(json.dumps(base))
    merged["model"]["vocab"] = vocab
    merged["model"]["merges"] = [list(m) for m in base_merges + extra]
    return merged, len(added), dropped, len(extra), first_id


def _check_byte_level_bpe(data: dict[str, Any], which: str) -> None:
    model_type = data.get("model", {}).get("type")
    if model_type != "BPE" or "ByteLevel" not in json.dumps(data.get("pre_tokenizer")):
        raise PolymnesiaError(
            f"merge_tokenizers supports byte-level BPE tokenizers only; the {which} tokenizer is "
            f"{model_type} with pre-tokenizer {(data.get('pre_tokenizer') or {}).get('type')}"
        )


def _check_collisions(candidates: list[str], base_special: set[str]) -> None:
    for tok in candidates:
        if tok in base_special:
            raise PolymnesiaError(
                f"merged vocabulary would collide with special token {tok!r}: the new tokenizer "
                "has it as an ordinary token; retrain it with that string as a special token"
            )


def _parse_merges(raw: list[Any]) -> list[Merge]:
    """Merges as (a, b) pairs, from either the list or the old ``"a b"`` string format."""
    out: list[Merge] = []
    for m in raw:
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        out.append((a, b))
    return out


def _choose_tokens(
    candidates: list[str],
    base_vocab: dict[str, int],
    new_merges: list[Merge],
    max_new_tokens: int | None,
) -> tuple[list[str], int]:
    """New tokens to append (in candidate order) and how many were dropped as unreachable."""
    producers: dict[str, list[Merge]] = {}
    for a, b in new_merges:
        producers.setdefault(a + b, []).append((a, b))
    known = set(base_vocab)
    added: list[str] = []
    dropped = 0
    for tok in candidates:
        if tok in known:
            continue
        if max_new_tokens is not None and len(added) >= max_new_tokens:
            break
        ways = producers.get(tok)
        if ways is None or any(a in known and b in known for a, b in ways):
            added.append(tok)
            known.add(tok)
        else:
            dropped += 1
    return added, dropped


def _closed_merges(
    new_merges: list[Merge], base_merges: set[Merge], vocab: dict[str, int], special: set[str]
) -> list[Merge]:
    """New merges (rank order) whose parts and result are all ordinary merged-vocab tokens."""
    out: list[Merge] = []
    seen = set(base_merges)
    for a, b in new_merges:
        result = a + b
        if (a, b) in seen or result in special or a in special or b in special:
            continue
        if a in vocab and b in vocab and result in vocab:
            out.append((a, b))
            seen.add((a, b))
    return out


def _next_id(data: dict[str, Any]) -> int:
    ids = list(data["model"]["vocab"].values()) + [t["id"] for t in data.get("added_tokens", [])]
    return max(ids, default=-1) + 1


def _rebuild_like(
    base: PreTrainedTokenizerFast, merged_json: dict[str, Any]
) -> PreTrainedTokenizerFast:
    """The base tokenizer (class, special tokens, chat template, max length) with a new backend."""
    backend = Tokenizer.from_str(json.dumps(merged_json))
    with tempfile.TemporaryDirectory(prefix="polymnesia-merge-") as tmp:
        base.save_pretrained(tmp)
        backend.save(str(Path(tmp) / "tokenizer.json"))
        merged = AutoTokenizer.from_pretrained(tmp, local_files_only=True)
    if not isinstance(merged, PreTrainedTokenizerFast):
        raise PolymnesiaError(
            f"merged tokenizer reloaded as {type(merged).__name__}, not a fast tokenizer"
        )
    for token in base.all_special_tokens:
        if merged.convert_tokens_to_ids(token) != base.convert_tokens_to_ids(token):
            raise PolymnesiaError(f"special token {token!r} changed id in the merge")
    return merged

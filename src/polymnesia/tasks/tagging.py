"""Token classification inputs and a small *constructed* tagging set.

Word-level tags live in ``record["meta"]["tags"]`` (one int per whitespace
word of ``record["text"]``). Each word is tokenized on its own, with a leading
space for every word but the first (how byte-level BPE pre-tokenizes text), so
the concatenated pieces are the tokenization of the space-joined words. The
label goes on the *first* sub-token of each word and ``-100`` (ignored by the
loss and by scoring) on the other sub-tokens and on BOS, as in the usual
Hugging Face NER recipe. Truncation at ``max_length`` tokens drops the words
that no longer fit entirely, so every scored word is whole.

With ``echo`` (for causal decoders, :class:`~polymnesia.tasks.config.TaskConfig`)
the words are laid out twice, ``BOS words SEP words`` (SEP: the tokenizer's
EOS), and only the second copy carries labels: each of its tokens has seen
the whole text. ``max_length`` counts both copies, so each holds about half.
"""

from __future__ import annotations

import random
from typing import Any, Literal

from polymnesia.errors import DataError, PolymnesiaError

IGNORE = -100


def build_token_examples(
    records: list[dict[str, Any]], tokenizer: Any, max_length: int, *, echo: bool = False
) -> list[dict[str, Any]]:
    """Tagged records -> ``{"input_ids", "labels": [int | -100], "lang", "id"}``.

    Records without ``meta["tags"]`` are skipped; a tag count that differs from
    the word count raises :class:`DataError` naming the record. ``echo``: the
    words twice, labels on the second copy (module docstring).
    """
    if max_length < (4 if echo else 2):
        least = "4 with echo (BOS, a token, SEP, its copy)" if echo else "2 (BOS + one token)"
        raise PolymnesiaError(f"max_length must be at least {least}, got {max_length}")
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
    sep = [separator(tokenizer)] if echo else []
    budget = len(bos) + (max_length - len(bos) - len(sep)) // 2 if echo else max_length
    out = []
    for r in records:
        tags = (r.get("meta") or {}).get("tags")
        if tags is None:
            continue
        words = r["text"].split()
        if len(words) != len(tags):
            raise DataError(
                f"record {r.get('id')} ({r.get('lang')}) has {len(words)} words but {len(tags)} "
                "tags"
            )
        pieces = tokenizer(
            [w if i == 0 else " " + w for i, w in enumerate(words)], add_special_tokens=False
        )["input_ids"]
        ids, labels = list(bos), [IGNORE] * len(bos)
        for tag, piece in zip(tags, pieces, strict=True):
            if not piece:
                continue
            if len(ids) + len(piece) > budget:
                break
            ids.extend(piece)
            labels.extend([int(tag)] + [IGNORE] * (len(piece) - 1))
        if echo:
            body = ids[len(bos) :]
            ids, labels = ids + sep + body, [IGNORE] * (len(ids) + len(sep)) + labels[len(bos) :]
        if any(x != IGNORE for x in labels):
            out.append({"input_ids": ids, "labels": labels, "lang": r["lang"], "id": r["id"]})
    return out


def separator(tokenizer: Any) -> int:
    """The token between a question and its passage, or between an echo's two copies:
    the tokenizer's EOS, else its pad token; a one-line error when it has neither."""
    for tid in (tokenizer.eos_token_id, tokenizer.pad_token_id):
        if tid is not None:
            return int(tid)
    raise PolymnesiaError("the tokenizer has neither an EOS nor a pad token to separate texts with")


def _cut(n: int, rng: random.Random) -> int:
    return rng.randint(1, n - 1) if n > 1 else 1


def language_id_tagging(
    records_a: list[dict[str, Any]],
    records_b: list[dict[str, Any]],
    seed: int,
    *,
    scheme: Literal["plain", "bio"] = "plain",
    max_words: int = 40,
    limit: int | None = None,
) -> list[dict[str, Any]]:
    """A code-switched word-level language-ID set built from two languages' aligned verses.

    **Constructed, not natural data.** For every verse id present in both
    lists (in ``records_a`` order), the first part of language A's verse is
    followed by the second part of language B's verse at a random word cut
    (``random.Random(seed)``; A's prefix has 1..n_a-1 words, B's suffix starts
    at the same relative position). The switch point is random, the text on
    each side is real. Each word is tagged with its language:

    * ``plain``: 0 = A, 1 = B (tag names ``[A, B]``);
    * ``bio``: 0 = O (unused), 1 = B-A, 2 = I-A, 3 = B-B, 4 = I-B: each side is one span,
      so ``span_f1`` scores whether the switch point is found.

    Returns records ``{id, lang: "A+B", text, label: None, meta: {tags,
    tag_names, constructed: True, source: [A, B]}}``; ``meta["tags"]`` has one
    int per whitespace word of ``text``.
    """
    if scheme not in ("plain", "bio"):
        raise PolymnesiaError(f"scheme must be 'plain' or 'bio', got '{scheme}'")
    if not records_a or not records_b:
        raise DataError("language_id_tagging needs records in both languages")
    la, lb = records_a[0]["lang"], records_b[0]["lang"]
    if la == lb:
        raise DataError(f"language_id_tagging needs two different languages, got '{la}' twice")
    by_id = {r["id"]: r for r in records_b}
    names = [la, lb] if scheme == "plain" else ["O", f"B-{la}", f"I-{la}", f"B-{lb}", f"I-{lb}"]
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for ra in records_a:
        rb = by_id.get(ra["id"])
        if rb is None:
            continue
        wa, wb = ra["text"].split()[:max_words], rb["text"].split()[:max_words]
        if len(wa) < 2 or len(wb) < 2:
            continue
        k = _cut(len(wa), rng)
        j = min(len(wb) - 1, max(1, round(k / len(wa) * len(wb))))
        left, right = wa[:k], wb[j:]
        if scheme == "plain":
            tags = [0] * len(left) + [1] * len(right)
        else:
            tags = [1] + [2] * (len(left) - 1) + [3] + [4] * (len(right) - 1)
        out.append(
            {
                "id": ra["id"],
                "lang": f"{la}+{lb}",
                "text": " ".join(left + right),
                "label": None,
                "meta": {"tags": tags, "tag_names": names, "constructed": True, "source": [la, lb]},
            }
        )
        if limit is not None and len(out) >= limit:
            break
    return out

"""Constructed offline tasks from labelled verses: genre tagging and genre questions.

**Constructed, not natural data** (data cards: docs/lf_mlf.md). Mao et al. 2022
evaluates NER (PAN-X) and extractive QA (TyDiQA-GoldP), which need the Hub.
Offline, both *formats* are exercised on passages built from the prepared
Bible verses of one language:

* a *passage* is ``k`` verses of ``k`` distinct genres (``record["label"]``),
  joined with spaces. Verses are taken in the order of a seeded hash of their
  id, so the same verse ids form the same passages in every language that has
  them (the test passages of two languages are translations of each other),
  and passages never mix splits (they are built inside one split);
* ``genre_segments`` (token kind, NER's format): every word is tagged with the
  BIO tag of its verse's genre (``B-law``, ``I-law``, ...), so ``span_f1``
  scores finding where each verse starts and ends *and* its genre;
* ``genre_question`` (span kind, extractive QA's format): one verse of the
  passage is chosen by the same hash; the question is its genre's name
  (``meta["genre"]``, English in every language, like a label word), the
  answer is that verse, located by its char offset.

What they measure: recognising a verse's genre from its words and locating
verse boundaries in running text, in each language, from real translated
text. What they do not: entity recognition, reading comprehension or
question answering as PAN-X and TyDiQA test them -- the "entities" are whole
verses and the questions are nine fixed words.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from polymnesia.errors import DataError, PolymnesiaError


def _key(seed: int, rid: str) -> str:
    return hashlib.sha256(f"{seed}:{rid}".encode()).hexdigest()


def genre_name(record: dict[str, Any]) -> str:
    return str((record.get("meta") or {}).get("genre") or f"label{int(record['label'])}")


def passages(records: Sequence[dict[str, Any]], k: int, seed: int) -> list[list[dict[str, Any]]]:
    """Groups of ``k`` labelled records of distinct labels, in seeded-hash order of their ids.

    Greedy: the first unused record opens a passage, which takes the next
    unused records whose label it does not yet have; an incomplete last
    passage is dropped.
    """
    if k < 2:
        raise PolymnesiaError(f"a passage needs at least 2 verses, got {k}")
    pool = sorted(
        (r for r in records if r.get("label") is not None), key=lambda r: _key(seed, r["id"])
    )
    used = [False] * len(pool)
    out = []
    for i, first in enumerate(pool):
        if used[i]:
            continue
        group, labels = [i], {first["label"]}
        for j in range(i + 1, len(pool)):
            if len(group) == k:
                break
            if not used[j] and pool[j]["label"] not in labels:
                group.append(j)
                labels.add(pool[j]["label"])
        if len(group) < k:
            continue
        for j in group:
            used[j] = True
        out.append([pool[j] for j in group])
    return out


def _passage_id(group: Sequence[dict[str, Any]]) -> str:
    return "+".join(str(r["id"]) for r in group)


def genre_tag_names(n_genres: int, names: dict[int, str]) -> list[str]:
    """``O, B-g0, I-g0, B-g1, ...``: tag ``1 + 2g`` begins genre g, ``2 + 2g`` continues it."""
    out = ["O"]
    for g in range(n_genres):
        out += [f"B-{names.get(g, f'label{g}')}", f"I-{names.get(g, f'label{g}')}"]
    return out


def genre_segments(
    records: Sequence[dict[str, Any]], k: int = 3, seed: int = 0
) -> list[dict[str, Any]]:
    """Passages with one BIO genre tag per whitespace word (``meta["tags"]``)."""
    out = []
    for group in passages(records, k, seed):
        words: list[str] = []
        tags: list[int] = []
        for r in group:
            w = r["text"].split()
            if not w:
                continue
            g = int(r["label"])
            words += w
            tags += [1 + 2 * g] + [2 + 2 * g] * (len(w) - 1)
        out.append(_record(group, " ".join(words), {"tags": tags}))
    return out


def genre_question(
    records: Sequence[dict[str, Any]], k: int = 3, seed: int = 0
) -> list[dict[str, Any]]:
    """Passages with a question (a genre name) and its answer (the verse of that genre)."""
    out = []
    for group in passages(records, k, seed):
        texts = [r["text"].strip() for r in group]
        if not all(texts):
            continue
        pick = int(_key(seed + 1, _passage_id(group)), 16) % len(group)
        start = sum(len(t) + 1 for t in texts[:pick])
        meta = {
            "question": genre_name(group[pick]),
            "answers": {"text": [texts[pick]], "answer_start": [start]},
        }
        out.append(_record(group, " ".join(texts), meta))
    return out


def _record(group: Sequence[dict[str, Any]], text: str, meta: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": _passage_id(group),
        "lang": group[0]["lang"],
        "text": text,
        "label": None,
        "meta": {**meta, "constructed": True, "verses": [r["id"] for r in group]},
    }


CONSTRUCTORS = {"genre_segments": genre_segments, "genre_question": genre_question}


def construct(
    name: str, records: Sequence[dict[str, Any]], k: int, seed: int = 0
) -> list[dict[str, Any]]:
    """The constructed task ``name`` built from one language's labelled ``records``."""
    if name not in CONSTRUCTORS:
        raise PolymnesiaError(
            f"unknown constructed task '{name}'; accepted: {', '.join(CONSTRUCTORS)}"
        )
    if records and not any(r.get("label") is not None for r in records):
        raise DataError(f"constructed task '{name}' needs labelled records (a genre per verse)")
    return CONSTRUCTORS[name](records, k, seed)


def label_names(records: Sequence[dict[str, Any]]) -> dict[int, str]:
    """Label id -> genre name, from the records that carry one."""
    return {int(r["label"]): genre_name(r) for r in records if r.get("label") is not None}

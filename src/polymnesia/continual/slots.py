"""Slot filling from MASSIVE-style annotations (Khelli et al. 2025's task), as word-level BIO tags.

MASSIVE (FitzGerald et al. 2023) marks slots inline in ``annot_utt``:
``wake me up at [time : nine am] on [date : friday]``. Khelli et al. 2025 trains a
token classifier on these slots and reports F1 over spans. Here an
annotation becomes whitespace words (a bracket boundary also ends a word, so
``[date : 明日]の天気`` gives ``明日`` and ``の天気``) tagged ``O``, ``B-slot``,
``I-slot``; the words are joined by single spaces as the record's text, and
:mod:`polymnesia.tasks.tagging` labels the first sub-token of each word.

Departure: the paper labels XLM-R's sentencepiece pieces. Word-level tags
are coarser in scripts written without spaces (ja, zh, th, km, my), where a
"word" is a whole run of characters between spaces or brackets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from polymnesia.errors import DataError

_SLOT = re.compile(r"\[([^\[\]:]*):([^\[\]]*)\]")


def parse_slots(annotated: str) -> tuple[list[str], list[str]]:
    """``'wake me [time : nine am]'`` -> ``(['wake', 'me', 'nine', 'am'], ['O', 'O', 'B-time',
    'I-time'])``.

    A malformed annotation (an unbalanced bracket, a slot without a name or
    without words) is a :class:`DataError` naming it.
    """
    words: list[str] = []
    tags: list[str] = []
    pos = 0
    for m in _SLOT.finditer(annotated):
        _plain(annotated[pos : m.start()], annotated, words, tags)
        name, value = m.group(1).strip(), m.group(2).split()
        if not name or not value or any(c.isspace() for c in name):
            raise DataError(f"malformed slot '{m.group(0)}' in annotation {annotated!r}")
        words += value
        tags += [f"B-{name}"] + [f"I-{name}"] * (len(value) - 1)
        pos = m.end()
    _plain(annotated[pos:], annotated, words, tags)
    return words, tags


def _plain(text: str, whole: str, words: list[str], tags: list[str]) -> None:
    if "[" in text or "]" in text:
        raise DataError(f"unbalanced bracket in slot annotation {whole!r}")
    parts = text.split()
    words += parts
    tags += ["O"] * len(parts)


def tag_inventory(slot_names: Iterable[str]) -> list[str]:
    """``['O', 'B-a', 'I-a', 'B-b', 'I-b', ...]`` for the slot names, sorted: label ids in a fixed
    order.
    """
    out = ["O"]
    for name in sorted(set(slot_names)):
        out += [f"B-{name}", f"I-{name}"]
    return out


def slot_names(records: Iterable[dict[str, Any]], field: str) -> set[str]:
    """Every slot name in the ``meta[field]`` annotations of ``records``."""
    names: set[str] = set()
    for r in records:
        _, tags = parse_slots(_annotation(r, field))
        names |= {t[2:] for t in tags if t != "O"}
    return names


def slot_records(
    records: Iterable[dict[str, Any]], field: str, inventory: list[str]
) -> list[dict[str, Any]]:
    """Records whose text is the annotation's words and whose ``meta["tags"]`` are label ids."""
    ids = {t: i for i, t in enumerate(inventory)}
    out = []
    for r in records:
        words, tags = parse_slots(_annotation(r, field))
        if not words:
            continue
        unknown = [t for t in tags if t not in ids]
        if unknown:
            raise DataError(
                f"record {r.get('id')} ({r.get('lang')}): slot tag {unknown[0]} is not in the "
                "inventory"
            )
        meta = {**(r.get("meta") or {}), "tags": [ids[t] for t in tags], "tag_names": inventory}
        out.append({**r, "text": " ".join(words), "meta": meta})
    return out


def _annotation(record: dict[str, Any], field: str) -> str:
    value = (record.get("meta") or {}).get(field)
    if not isinstance(value, str):
        raise DataError(
            f"record {record.get('id')} ({record.get('lang')}) has no slot annotation "
            f"meta['{field}']; give the source the annotated column (hf: meta_fields)"
        )
    return value

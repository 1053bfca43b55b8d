"""Instruction records and the instruction templates every instruction task shares.

Records are Alpaca-style ``{"instruction", "input", "output"}``
(:class:`InstructionRecord`). :func:`bible_instructions` derives Aggarwal et al. 2024's
English records offline from the Bible verses of the prepared data (see
:data:`DATA_CARD`); Hub datasets (OpenOrca, Alpaca, ...) are read by
:mod:`polymnesia.instructions.hub`. The templates (the genre question, verse
continuation, reference lookup, translation) are shared by instruction tuning,
the zero-shot evaluation and the offline lm-eval tasks.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from polymnesia.errors import DataError

#: the genre question, shared by instruction tuning and the zero-shot evaluation
GENRE_INSTRUCTION = "Which part of the Bible is this verse from? Answer with one of: {choices}."
CONTINUE_INSTRUCTION = "Continue this verse:"
TASKS = ("genre", "continue")

DATA_CARD = """# Bible instruction data (English, derived offline)

Made by `polymnesia.instructions.records.bible_instructions` from the *train*
split of the English Bible prepared by the `prepare_data` stage (World English
Bible, public domain). Nothing is written by hand or by a model:

* **genre**: instruction "Which part of the Bible is this verse from? Answer
  with one of: law, history, ...", input = the verse, output = the name of
  the genre of its book (9 classes, `polymnesia.data.sources.bible.BIBLE_GENRES`,
  underscores as spaces).
* **continue**: instruction "Continue this verse:", input = the first half of
  the verse's words, output = the second half (verses of at least 6 words).

Each verse gives at most one record per task; records are shuffled with the
stage seed. Test and validation verses are never used, so the zero-shot genre
evaluation (which asks the genre question about *test* verses in every
language) sees no verse the model was tuned on. Limits: the genre of a verse is
a property of its book, not always of its content, so the task is hard even
for people; English only (Aggarwal et al. 2024 tune on English OpenOrca).
"""


@dataclass(frozen=True)
class InstructionRecord:
    instruction: str
    input: str
    output: str

    def as_dict(self) -> dict[str, str]:
        return asdict(self)


def genre_name(label: str) -> str:
    return label.replace("_", " ")


def genre_instruction(genres: Sequence[str]) -> str:
    return GENRE_INSTRUCTION.format(choices=", ".join(genre_name(g) for g in genres))


def check_record(rec: Mapping[str, Any], where: str) -> InstructionRecord:
    """An :class:`InstructionRecord` from a mapping, or one line naming what is missing."""
    out, ins = rec.get("output"), rec.get("instruction")
    if not isinstance(out, str) or not out.strip():
        raise DataError(
            f"instruction record {where} has no output; every record needs a non-empty output"
        )
    if not isinstance(ins, str) or not ins.strip():
        raise DataError(f"instruction record {where} has no instruction")
    inp = rec.get("input") or ""
    return InstructionRecord(ins, str(inp), out)


def halves(text: str) -> tuple[str, str] | None:
    """First and second half of a verse: by words (at least 6), else by characters for
    unspaced scripts (no whitespace, at least 12 characters), else None."""
    words = text.split()
    if len(words) >= 6:
        mid = len(words) // 2
        return " ".join(words[:mid]), " ".join(words[mid:])
    if len(words) == 1 and len(text) >= 12:
        mid = len(text) // 2
        return text[:mid], text[mid:]
    return None


def split_verse(text: str) -> tuple[str, str] | None:
    """First and second half of a verse's words, or None for verses under 6 words."""
    words = text.split()
    if len(words) < 6:
        return None
    mid = len(words) // 2
    return " ".join(words[:mid]), " ".join(words[mid:])


def bible_records(
    verses: Sequence[Mapping[str, Any]],
    genres: Sequence[str],
    tasks: Sequence[str] = TASKS,
    *,
    limit: int | None = None,
    seed: int = 0,
) -> list[tuple[str, str, InstructionRecord]]:
    """``(verse id, task, record)`` of :func:`bible_instructions`, in the same order."""
    bad = [t for t in tasks if t not in TASKS]
    if bad:
        raise DataError(f"unknown instruction task(s) {bad}; accepted: {', '.join(TASKS)}")
    question = genre_instruction(genres)
    out: list[tuple[str, str, InstructionRecord]] = []
    for v in verses:
        text, vid = v["text"], str(v.get("id"))
        if "genre" in tasks:
            genre = (v.get("meta") or {}).get("genre")
            if genre is None:
                raise DataError(f"verse {v.get('id')} has no meta.genre; use the 'bible' source")
            out.append((vid, "genre", InstructionRecord(question, text, genre_name(genre))))
        if "continue" in tasks and (halves := split_verse(text)):
            out.append((vid, "continue", InstructionRecord(CONTINUE_INSTRUCTION, *halves)))
    random.Random(seed).shuffle(out)
    return out[:limit] if limit else out


def bible_instructions(
    verses: Sequence[Mapping[str, Any]],
    genres: Sequence[str],
    tasks: Sequence[str] = TASKS,
    *,
    limit: int | None = None,
    seed: int = 0,
) -> list[InstructionRecord]:
    """Records from prepared Bible verses (dicts with ``text`` and ``meta.genre``); see
    DATA_CARD.
    """
    return [rec for _, _, rec in bible_records(verses, genres, tasks, limit=limit, seed=seed)]


#: the verse-reference lookup task (two_phase EA/MA, poly_reference)
REFERENCE_INSTRUCTION = (
    "Which book, chapter and verse of the Bible is this? "
    "Answer with three numbers as BOOK.CHAPTER.VERSE (Genesis is book 1)."
)
#: the translation task (poly_translate)
TRANSLATE_INSTRUCTION = "Translate this verse from {src} into {tgt}."

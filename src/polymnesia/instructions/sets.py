"""Offline instruction sets for two-phase continual instruction fine-tuning (the two-phase CFT
paper).

The two-phase CFT paper tunes on an English set in Phase 1 (Alpaca) and a multilingual set
in Phase 2 that is either *similar* (MultiAlpaca: Alpaca's seed tasks asked in
11 languages) or *dissimilar* (the vendor's "Instruct" data vs MultiAlpaca).
Offline, the verse-aligned Bible lets us set that similarity on purpose:

* :func:`phase1_english`: English instructions of the kinds ``PHASE1_KINDS``:
  the five verifiable format instructions of :mod:`polymnesia.instructions.ifeval`
  (quote, no_comma, title, end_phrase, bullets; checked by lm-eval's IFEval
  checkers) and the genre question (exact answer among 9);
* :func:`phase2_similar`: the same kinds asked *in other languages* about
  verses in those languages (instruction templates in MultiAlpaca's languages
  that the Bible has: fr, ar, de, es, id, ja, ko, pt, ru, vi; the genre
  question stays English, as the zero-shot evaluation asks it);
* :func:`phase2_dissimilar`: other task types in other languages: verse
  reference lookup (answer ``BOOK.CHAPTER.VERSE``, exact), translation between
  two non-English languages (chrF against the aligned verse) and continuation
  of a verse in language X (the second half: exact / chrF). Their instructions
  are English (any of the 22 Bible languages can be asked), a documented
  difference from MultiAlpaca, whose instructions are translated;
* :func:`english_counterpart`: the English version of each Phase 2 record
  (same verse, same kind, English instruction and answer): the pool of English
  replay ER_10 (original answers) and the instructions answered by the Phase 1
  model for generative replay GR_5/GR_10 (:mod:`polymnesia.instructions.replay`).

Every record says how it is checked (``check``: ``ifeval``, ``exact`` or
``chrf``) and, for ``ifeval``, its IFEval instruction ids and arguments; a
record whose own answer fails its IFEval check is never recorded. Records use
the *train* split only (the harness tasks use test and validation). Phase 2
sets never share verse ids with the set passed as ``exclude``.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from polymnesia.data.languages import get_language
from polymnesia.data.prepared import read_split, sample_aligned
from polymnesia.data.sources.bible import BIBLE_GENRES
from polymnesia.errors import DataError
from polymnesia.instructions.ifeval import (
    INSTRUCTION_LANGUAGES,
    KINDS,
    item_passes,
    verifiable_item,
)
from polymnesia.instructions.records import (
    CONTINUE_INSTRUCTION,
    REFERENCE_INSTRUCTION,
    TRANSLATE_INSTRUCTION,
    InstructionRecord,
    genre_instruction,
    genre_name,
    halves,
)
from polymnesia.io import atomic_write_text, read_jsonl_strict

PHASE1_KINDS: tuple[str, ...] = (*KINDS, "genre")
DISSIMILAR_KINDS: tuple[str, ...] = ("reference", "translate", "continue")


@dataclass(frozen=True)
class TwoPhaseRecord:
    """One instruction example with the language, kind, verse and how its answer is checked."""

    instruction: str
    input: str
    output: str
    lang: str
    kind: str
    verse_id: str
    check: str  # "ifeval" | "exact" | "chrf"
    instruction_id_list: list[str] = field(default_factory=list)
    kwargs: list[dict[str, Any]] = field(default_factory=list)

    def as_instruction(self) -> InstructionRecord:
        """The Alpaca-style triple the SFT example builder takes."""
        return InstructionRecord(self.instruction, self.input, self.output)


@dataclass
class InstructionSet:
    """A named set of records with its data card (Markdown)."""

    name: str
    records: list[TwoPhaseRecord]
    card: str = ""

    @property
    def languages(self) -> list[str]:
        return sorted({r.lang for r in self.records})

    @property
    def verse_ids(self) -> set[str]:
        return {r.verse_id for r in self.records}

    def counts(self) -> dict[str, dict[str, int]]:
        """``{"lang": {...}, "kind": {...}}``: how many records of each."""
        return {
            "lang": dict(sorted(Counter(r.lang for r in self.records).items())),
            "kind": dict(sorted(Counter(r.kind for r in self.records).items())),
        }

    def instructions(self) -> list[InstructionRecord]:
        return [r.as_instruction() for r in self.records]


# -- building records --------------------------------------------------------------------


def _lang_name(code: str) -> str:
    return get_language(code).name


def make_record(
    kind: str, lang: str, verse: Mapping[str, Any], other: Mapping[str, Any] | None = None
) -> TwoPhaseRecord | None:
    """The record of ``kind`` about ``verse`` (in ``lang``); None when the verse does not fit.

    ``other``: the aligned verse in the target language, for ``translate``.
    """
    vid, text = str(verse["id"]), str(verse["text"])
    if kind in KINDS:
        try:
            item = verifiable_item(kind, lang, text)
        except DataError:
            return None
        if not item_passes(item):
            return None
        return TwoPhaseRecord(
            item.instruction,
            item.input,
            item.output,
            lang,
            kind,
            vid,
            "ifeval",
            item.instruction_id_list,
            item.kwargs,
        )
    if kind == "genre":
        genre = (verse.get("meta") or {}).get("genre")
        if genre not in BIBLE_GENRES:
            raise DataError(f"verse {vid} has no Bible genre; two-phase sets need the bible source")
        question = genre_instruction(BIBLE_GENRES)
        return TwoPhaseRecord(question, text, genre_name(genre), lang, kind, vid, "exact")
    if kind == "reference":
        return TwoPhaseRecord(REFERENCE_INSTRUCTION, text, vid, lang, kind, vid, "exact")
    if kind == "continue":
        h = halves(text)
        if h is None:
            return None
        return TwoPhaseRecord(CONTINUE_INSTRUCTION, h[0], h[1], lang, kind, vid, "exact")
    if kind == "translate":
        if other is None:
            raise DataError("a translate record needs the aligned verse in the target language")
        tgt = str(other["lang"])
        ins = TRANSLATE_INSTRUCTION.format(src=_lang_name(lang), tgt=_lang_name(tgt))
        return TwoPhaseRecord(ins, text, str(other["text"]), lang, kind, vid, "chrf")
    accepted = ", ".join((*PHASE1_KINDS, *DISSIMILAR_KINDS))
    raise DataError(f"unknown two-phase instruction kind '{kind}'; accepted: {accepted}")


def _check_kinds(kinds: Sequence[str], accepted: Sequence[str], which: str) -> None:
    bad = [k for k in kinds if k not in accepted]
    if bad or not kinds:
        raise DataError(
            f"{which}: unknown or no instruction kind(s) {bad}; accepted: {', '.join(accepted)}"
        )


def _aligned(
    data_dir: Path, langs: Sequence[str], split: str, exclude: Collection[str], seed: int
) -> tuple[dict[str, list[dict[str, Any]]], list[int]]:
    """Verses aligned over ``langs`` (and English), minus ``exclude``, in a seeded order."""

    need = list(dict.fromkeys(["en", *langs]))
    aligned = sample_aligned(data_dir, need, split, None)
    excluded = set(exclude)
    order = [i for i, r in enumerate(aligned["en"]) if r["id"] not in excluded]
    random.Random(seed).shuffle(order)
    return aligned, order


def _with_card(name: str, recs: list[TwoPhaseRecord], title: str, split: str) -> InstructionSet:
    """The set ``name`` of ``recs`` with its data card (titled ``title``, from ``split``)."""
    s = InstructionSet(name, recs)
    s.card = data_card(s, title, split)
    return s


def _build(
    name: str,
    title: str,
    data_dir: Path,
    plan: Sequence[tuple[str, str, str | None]],  # (kind, lang, target lang for translate)
    n: int,
    *,
    split: str,
    exclude: Collection[str],
    seed: int,
) -> InstructionSet:
    """Set ``name`` (card titled ``title``): ``n`` records cycling through ``plan``; each verse used
    once.
    """
    if n <= 0:
        raise DataError(f"an instruction set needs a positive size, got {n}")
    langs = sorted({x for k, lang, tgt in plan for x in (lang, tgt) if x})
    aligned, order = _aligned(data_dir, langs, split, exclude, seed)
    out: list[TwoPhaseRecord] = []
    for i in order:
        if len(out) >= n:
            break
        kind, lang, tgt = plan[len(out) % len(plan)]
        rec = make_record(kind, lang, aligned[lang][i], aligned[tgt][i] if tgt else None)
        if rec is not None:
            out.append(rec)
    if len(out) < n:
        raise DataError(
            f"only {len(out)} of {n} instruction records could be built from the {split} split "
            f"({len(order)} aligned verses); ask for fewer or prepare more verses"
        )
    return _with_card(name, out, title, split)


def phase1_english(
    data_dir: Path,
    n: int,
    *,
    kinds: Sequence[str] = PHASE1_KINDS,
    split: str = "train",
    exclude: Collection[str] = (),
    seed: int = 0,
) -> InstructionSet:
    """Phase 1: ``n`` English records, the ``kinds`` in turn (see the module docstring)."""
    _check_kinds(kinds, PHASE1_KINDS, "phase 1")
    plan = [(k, "en", None) for k in kinds]
    return _build(
        "phase1_english",
        "Phase 1 (English)",
        data_dir,
        plan,
        n,
        split=split,
        exclude=exclude,
        seed=seed,
    )


def phase2_similar(
    data_dir: Path,
    languages: Sequence[str],
    n: int,
    *,
    kinds: Sequence[str] = PHASE1_KINDS,
    split: str = "train",
    exclude: Collection[str] = (),
    seed: int = 0,
) -> InstructionSet:
    """Phase 2, similar: Phase 1's kinds asked in ``languages`` (with instruction templates)."""
    _check_kinds(kinds, PHASE1_KINDS, "phase 2 similar")
    bad = [x for x in languages if x not in INSTRUCTION_LANGUAGES or x == "en"]
    if bad or not languages:
        raise DataError(
            f"phase 2 similar: no instruction templates for {bad or 'no language'}; accepted: "
            + ", ".join(x for x in INSTRUCTION_LANGUAGES if x != "en")
        )
    plan = [(k, lang, None) for k in kinds for lang in languages]
    return _build(
        "phase2_similar",
        "Phase 2, similar (Phase 1's kinds in other languages)",
        data_dir,
        plan,
        n,
        split=split,
        exclude=exclude,
        seed=seed,
    )


def phase2_dissimilar(
    data_dir: Path,
    languages: Sequence[str],
    n: int,
    *,
    kinds: Sequence[str] = DISSIMILAR_KINDS,
    split: str = "train",
    exclude: Collection[str] = (),
    seed: int = 0,
) -> InstructionSet:
    """Phase 2, dissimilar: reference lookup, translation X -> next language, continuation in X."""
    _check_kinds(kinds, DISSIMILAR_KINDS, "phase 2 dissimilar")
    langs = [x for x in languages if x != "en"]
    if len(langs) < (2 if "translate" in kinds else 1) or len(langs) != len(languages):
        raise DataError(
            "phase 2 dissimilar needs non-English languages (at least 2 for translation), "
            f"got {list(languages)}"
        )
    nxt = {x: langs[(i + 1) % len(langs)] for i, x in enumerate(langs)}
    plan = [(k, x, nxt[x] if k == "translate" else None) for k in kinds for x in langs]
    return _build(
        "phase2_dissimilar",
        "Phase 2, dissimilar (other task types in other languages)",
        data_dir,
        plan,
        n,
        split=split,
        exclude=exclude,
        seed=seed,
    )


def english_counterpart(
    phase2: InstructionSet, data_dir: Path, *, split: str = "train"
) -> InstructionSet:
    """The English version of every Phase 2 record (same verse and kind), in the same order.

    Translation X -> Y becomes X -> English, so that every answer is English.
    Records whose English verse does not fit the kind are left out.
    """

    en = {r["id"]: r for r in read_split(data_dir, "en", split)}
    src = {
        lang: {r["id"]: r for r in read_split(data_dir, lang, split)} for lang in phase2.languages
    }
    out = []
    for r in phase2.records:
        if r.verse_id not in en:
            continue
        if r.kind == "translate":
            rec = make_record("translate", r.lang, src[r.lang][r.verse_id], en[r.verse_id])
        else:
            rec = make_record(r.kind, "en", en[r.verse_id])
        if rec is not None:
            out.append(rec)
    return _with_card(
        f"{phase2.name}_english", out, f"English counterpart of {phase2.name} (replay pool)", split
    )


def verse_overlap(a: InstructionSet, b: InstructionSet) -> set[str]:
    """Verse ids used by both sets (the two-phase CFT paper's Phase 2 has no access to Phase 1
    data)."""
    return a.verse_ids & b.verse_ids


# -- cards and files ---------------------------------------------------------------------

_KIND_TEXT = {
    "quote": "repeat the verse in double quotes (IFEval startend:quotation)",
    "no_comma": "repeat the verse without commas (IFEval punctuation:no_comma)",
    "title": "repeat the verse under a <<title>> (IFEval detectable_format:title)",
    "end_phrase": 'repeat the verse, end with "Amen." (IFEval startend:end_checker)',
    "bullets": "the verse as exactly 3 bullets (IFEval detectable_format:number_bullet_lists)",
    "genre": "which of the 9 Bible genres the verse is from (exact answer)",
    "reference": "the verse's BOOK.CHAPTER.VERSE (exact answer)",
    "translate": "translate the verse into another non-English language (chrF vs the aligned "
    "verse)",
    "continue": "the second half of the verse (exact / chrF)",
}


def data_card(s: InstructionSet, title: str, split: str) -> str:
    """A Markdown card: what, how many, which languages, how checked, licence note."""
    c = s.counts()
    kinds = "\n".join(f"* **{k}** ({v}): {_KIND_TEXT[k]}" for k, v in c["kind"].items())
    langs = ", ".join(f"{k} ({v})" for k, v in c["lang"].items())
    return (
        f"# {title}: `{s.name}`\n\n"
        f"{len(s.records)} instruction records made by `polymnesia.instructions.sets` from the "
        f"*{split}* split of the verse-aligned Bible (`prepare_data` stage); nothing is written "
        "by hand or by a model beyond the instruction templates.\n\n"
        f"Languages: {langs}.\n\nKinds:\n{kinds}\n\n"
        "Every answer can be checked automatically (field `check`). Licence: public-domain "
        "editions where a language has one; pt, ja, ko, id, zh, pl, ro, hi, bn, tr, sw, uk are "
        "under their publishers' copyright: research use from your own cache, never "
        "redistribute.\n"
    )


def write_instruction_set(s: InstructionSet, folder: Path) -> None:
    """``folder/records.jsonl`` and ``folder/DATA_CARD.md``."""

    lines = "".join(json.dumps(asdict(r), ensure_ascii=False) + "\n" for r in s.records)
    atomic_write_text(folder / "records.jsonl", lines)
    atomic_write_text(folder / "DATA_CARD.md", s.card)


def read_instruction_set(folder: Path, name: str | None = None) -> InstructionSet:
    path = folder / "records.jsonl"
    if not path.exists():
        raise DataError(f"no instruction set in {folder} (records.jsonl missing)")
    recs = [TwoPhaseRecord(**r) for r in read_jsonl_strict(path)]
    card = (
        (folder / "DATA_CARD.md").read_text("utf-8") if (folder / "DATA_CARD.md").exists() else ""
    )
    return InstructionSet(name or folder.name, recs, card)

"""The documents of the offline lm-eval tasks, written from the prepared Bible split.

:func:`write_task_data` turns the ``prepare_data`` stage's folder
(``LANG/{test,validation}.jsonl``) into one JSONL file per task and split in
a folder; lm-eval reads them through the tasks' ``custom_dataset``
(:func:`load_docs`), which gets that folder from lm-eval's task metadata
(``polymnesia_data``). Test documents come from the *test* split, few-shot
examples from *validation*, so no document was trained on.

Every prompt is in the chat format of the evaluated model (:class:`ChatFormat`):
the prompt its instruction tuning and polymnesia's other evaluation stages
use (:func:`polymnesia.evaluation.generation.chat_prompt` with its
tokenizer: its own chat template, or ChatML for a tokenizer without one, as
every model polymnesia builds); answers end with that format's end-of-turn
marker (:func:`polymnesia.tokenizers.chat.turn_end`: ``<|im_end|>`` in
ChatML), as the tuned model writes them. A template that writes BOS (Llama-3's
``<|begin_of_text|>``) has it taken off each document: lm-eval prepends BOS to
the whole context (``add_bos_token``), once, however many few-shot examples
precede the question. Without a tokenizer the documents
are ChatML. Next to the documents go the tasks' YAML for that format
(generation stops at the marker; :func:`polymnesia.harness.tasks.model_task_yamls`),
so the folder is lm-eval's include path. The same verse ids are used in every
language of a family (the ids valid in all of them), so scores compare
languages on translations of the same verses.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from polymnesia.data.languages import get_language
from polymnesia.data.prepared import sample_aligned
from polymnesia.data.sources.bible import BIBLE_GENRES
from polymnesia.errors import DataError
from polymnesia.evaluation.generation import chat_prompt
from polymnesia.harness.tasks import HARNESS_TASKS, expand, model_task_yamls
from polymnesia.instructions.ifeval import KINDS, item_passes, verifiable_item
from polymnesia.instructions.punkt import ensure_punkt
from polymnesia.instructions.records import (
    CONTINUE_INSTRUCTION,
    REFERENCE_INSTRUCTION,
    TRANSLATE_INSTRUCTION,
    genre_instruction,
    genre_name,
    halves,
)
from polymnesia.io import atomic_write_text, read_jsonl_strict
from polymnesia.tokenizers.chat import turn_end

N_CHOICES = 4
Doc = dict[str, Any]


@dataclass(frozen=True)
class ChatFormat:
    """How a model is asked and how its answers end: its tokenizer's chat format (None: ChatML)."""

    tokenizer: Any = None

    def prompt(self, instruction: str, input: str) -> str:
        """System, user and the assistant's generation prompt (``chat_prompt``), without the
        BOS a template may write at its head: lm-eval puts BOS at the head of the whole
        context (``add_bos_token``), so a few-shot context holds it once, not once per
        example."""
        text = chat_prompt(instruction, input, self.tokenizer)
        bos = getattr(self.tokenizer, "bos_token", None)
        return text[len(bos) :] if bos and text.startswith(bos) else text

    @cached_property
    def end(self) -> str:
        """The end-of-turn marker after an answer (``<|im_end|>`` in ChatML)."""
        return turn_end(self.tokenizer)


def genre_doc(
    rec: Mapping[str, Any], i: int, pool: Sequence[Mapping[str, Any]], fmt: ChatFormat
) -> Doc | None:
    genre = (rec.get("meta") or {}).get("genre")
    if genre not in BIBLE_GENRES:
        raise DataError(
            f"verse {rec.get('id')} has no Bible genre; the tasks need the bible source"
        )
    return {
        "id": rec["id"],
        "prompt": fmt.prompt(genre_instruction(BIBLE_GENRES), rec["text"]),
        "choices": [genre_name(g) + fmt.end for g in BIBLE_GENRES],
        "gold": BIBLE_GENRES.index(genre),
    }


def continue_mc_doc(
    rec: Mapping[str, Any], i: int, pool: Sequence[Mapping[str, Any]], fmt: ChatFormat
) -> Doc | None:
    """Second half among 4: 3 distractor halves from other verses of the pool (seeded by ``i``)."""

    h = halves(rec["text"])
    if h is None:
        return None
    others = list(  # distinct second halves of other verses, never the right one
        dict.fromkeys(
            x[1] for r in pool if r["id"] != rec["id"] and (x := halves(r["text"])) and x[1] != h[1]
        )
    )
    if len(others) < N_CHOICES - 1:
        raise DataError("too few verses to draw multiple-choice distractors from")
    rng = random.Random(f"{rec['id']}:{i}")
    choices = [*rng.sample(others, N_CHOICES - 1), h[1]]
    rng.shuffle(choices)
    return {
        "id": rec["id"],
        "prompt": fmt.prompt(CONTINUE_INSTRUCTION, h[0]),
        "choices": [c + fmt.end for c in choices],
        "gold": choices.index(h[1]),
    }


def continue_gen_doc(
    rec: Mapping[str, Any], i: int, pool: Sequence[Mapping[str, Any]], fmt: ChatFormat
) -> Doc | None:
    h = halves(rec["text"])
    if h is None:
        return None
    return {"id": rec["id"], "prompt": fmt.prompt(CONTINUE_INSTRUCTION, h[0]), "target": h[1]}


def ifeval_doc(
    rec: Mapping[str, Any], i: int, pool: Sequence[Mapping[str, Any]], fmt: ChatFormat
) -> Doc | None:
    """Instruction kind ``KINDS[i % 5]`` about the verse; None when its own answer fails the
    check.
    """

    kind = KINDS[i % len(KINDS)]
    try:
        item = verifiable_item(kind, rec["lang"], rec["text"])
    except DataError:
        return None
    if not item_passes(item):
        return None
    return {
        "id": rec["id"],
        "key": i,
        "prompt": fmt.prompt(item.instruction, item.input),
        "target": item.output,
        "instruction_id_list": item.instruction_id_list,
        "kwargs": item.kwargs,
    }


def _one_kind(kind: str) -> Builder:
    """:func:`ifeval_doc` with every document of the IFEval kind ``kind`` (title, quote)."""

    def build(
        rec: Mapping[str, Any], i: int, pool: Sequence[Mapping[str, Any]], fmt: ChatFormat
    ) -> Doc | None:
        return ifeval_doc(rec, KINDS.index(kind), pool, fmt)

    return build


def _choices(
    rec: Mapping[str, Any], i: int, right: str, others: Sequence[str], fmt: ChatFormat, tag: str
) -> tuple[list[str], int]:
    """``right`` and 3 of ``others`` (seeded by the verse and ``i``), shuffled, with the format's
    end marker; and the index of ``right``."""
    pool = list(dict.fromkeys(o for o in others if o != right))
    if len(pool) < N_CHOICES - 1:
        raise DataError("too few verses to draw multiple-choice distractors from")
    rng = random.Random(f"{rec['id']}:{i}:{tag}")
    choices = [*rng.sample(pool, N_CHOICES - 1), right]
    rng.shuffle(choices)
    return [c + fmt.end for c in choices], choices.index(right)


def reference_doc(
    rec: Mapping[str, Any], i: int, pool: Sequence[Mapping[str, Any]], fmt: ChatFormat
) -> Doc | None:
    """``BOOK.CHAPTER.VERSE`` of the verse among 4 references (3 of other verses of the pool),
    asked as the dissimilar Phase 2 set asks it."""

    vid = str(rec["id"])
    choices, gold = _choices(rec, i, vid, [str(r["id"]) for r in pool], fmt, "reference")
    return {
        "id": vid,
        "prompt": fmt.prompt(REFERENCE_INSTRUCTION, rec["text"]),
        "choices": choices,
        "gold": gold,
    }


def translate_doc(
    rec: Mapping[str, Any], i: int, pool: Sequence[Mapping[str, Any]], fmt: ChatFormat
) -> Doc | None:
    """The translation into the verse's language of its English version (``rec["en_text"]``)
    among 4 verses in that language (3 other verses of the pool)."""

    text = str(rec["text"])
    choices, gold = _choices(rec, i, text, [str(r["text"]) for r in pool], fmt, "translate")
    ins = TRANSLATE_INSTRUCTION.format(src="English", tgt=get_language(str(rec["lang"])).name)
    return {
        "id": rec["id"],
        "prompt": fmt.prompt(ins, rec["en_text"]),
        "choices": choices,
        "gold": gold,
    }


Builder = Callable[[Mapping[str, Any], int, Sequence[Mapping[str, Any]], ChatFormat], Doc | None]
BUILDERS: dict[str, Builder] = {
    "poly_genre": genre_doc,
    "poly_continue_mc": continue_mc_doc,
    "poly_continue_gen": continue_gen_doc,
    "poly_ifeval": ifeval_doc,
    "poly_title": _one_kind("title"),
    "poly_quote": _one_kind("quote"),
    "poly_reference": reference_doc,
    "poly_translate": translate_doc,
}
#: families whose documents also read the aligned English verse (``rec["en_text"]``)
WITH_ENGLISH = ("poly_translate",)


def family_docs(
    data_dir: Path,
    family: str,
    langs: Sequence[str],
    split: str,
    n: int,
    seed: int,
    fmt: ChatFormat | None = None,
) -> dict[str, list[Doc]]:
    """Up to ``n`` documents per language, on the same verse ids in every language of ``langs``,
    in the chat format ``fmt`` (None: ChatML)."""

    build, fmt = BUILDERS[family], fmt or ChatFormat()
    english = family in WITH_ENGLISH
    aligned = sample_aligned(
        data_dir, list(dict.fromkeys([*langs, "en"] if english else langs)), split, None
    )
    count = len(aligned[langs[0]])
    order = list(range(count))
    random.Random(seed).shuffle(order)
    out: dict[str, list[Doc]] = {lang: [] for lang in langs}

    def record(lang: str, k: int) -> Mapping[str, Any]:
        rec = aligned[lang][k]
        return {**rec, "en_text": aligned["en"][k]["text"]} if english else rec

    for k in order:
        if len(out[langs[0]]) >= n:
            break
        docs = {lang: build(record(lang, k), len(out[lang]), aligned[lang], fmt) for lang in langs}
        ready = {lang: d for lang, d in docs.items() if d is not None}
        if len(ready) == len(docs):
            for lang, d in ready.items():
                out[lang].append(d)
    return out


def _write_jsonl(path: Path, docs: Sequence[Doc]) -> None:
    import json

    atomic_write_text(path, "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs))


def write_task_data(
    prepared_dir: Path,
    out_dir: Path,
    tasks: Sequence[str],
    *,
    n: int = 100,
    n_fewshot: int = 8,
    seed: int = 0,
    tokenizer: Any = None,
) -> dict[str, int]:
    """Write ``out_dir/TASK.{test,validation}.jsonl`` and ``out_dir/TASK.yaml`` for shipped
    ``tasks`` in the chat format of ``tokenizer`` (None: ChatML); return test counts."""

    fmt = ChatFormat(tokenizer)
    names = expand(tasks)
    by_family: dict[str, list[str]] = {}
    for name in names:
        t = HARNESS_TASKS.get(name)
        by_family.setdefault(t.family, []).append(t.lang)
    counts: dict[str, int] = {}
    for family, langs in by_family.items():
        for split, k in (("test", n), ("validation", n_fewshot)):
            docs = family_docs(prepared_dir, family, langs, split, k, seed, fmt)
            for lang, items in docs.items():
                if split == "test" and not items:
                    raise DataError(f"no usable {split} verse for task {family}_{lang}")
                _write_jsonl(out_dir / f"{family}_{lang}.{split}.jsonl", items)
                if split == "test":
                    counts[f"{family}_{lang}"] = len(items)
    for name, text in model_task_yamls(names, fmt.end).items():
        atomic_write_text(out_dir / name, text)
    return counts


def load_docs(
    polymnesia_data: str | None = None, polymnesia_task: str | None = None, **_: Any
) -> Any:
    """lm-eval's ``custom_dataset``: the task's documents from the folder in its metadata."""
    import datasets

    if not polymnesia_data or not polymnesia_task:
        raise DataError(
            f"polymnesia task {polymnesia_task}: no document folder; run it through "
            "polymnesia.harness.run_lm_eval (or pass --metadata "
            '\'{"polymnesia_data": "FOLDER"}\' to lm_eval)'
        )
    folder = Path(polymnesia_data)
    splits = {}
    for split in ("test", "validation"):
        path = folder / f"{polymnesia_task}.{split}.jsonl"
        if not path.exists():
            raise DataError(f"no documents for task {polymnesia_task} in {folder} ({path.name})")
        splits[split] = datasets.Dataset.from_list(read_jsonl_strict(path))
    return datasets.DatasetDict(splits)


def process_ifeval(doc: Mapping[str, Any], results: Sequence[str]) -> dict[str, Any]:
    """lm-eval's IFEval ``process_results`` on our documents, with the Punkt data offline."""

    ensure_punkt()
    from lm_eval.tasks.ifeval.utils import process_results

    return dict(process_results(doc, results))


def agg_inst_level_acc(items: Sequence[Sequence[bool]]) -> float:
    """Instruction-level accuracy: the share of all single instructions followed (IFEval)."""
    flat = [x for sub in items for x in sub]
    return sum(flat) / len(flat) if flat else 0.0

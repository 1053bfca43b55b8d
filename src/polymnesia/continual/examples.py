"""Per-language task examples for sequential training, on top of :mod:`polymnesia.tasks`.

Sequence tasks read the prepared records' ``label`` (the Bible verse genre).
Token tasks take their tags from one of two places:

* ``slot_field``: slot annotations kept in each record's ``meta`` (MASSIVE's
  ``annot_utt``, the paper's slot filling), turned into BIO tags by
  :mod:`polymnesia.continual.slots` with one tag inventory for every language
  (:func:`slot_tags`);
* ``pivot``: the *constructed* language-ID tagging set of
  :func:`polymnesia.tasks.tagging.language_id_tagging`: for language ``l`` each
  example is the start of an ``l`` verse followed by the end of the same verse
  in the ``pivot`` language, every word tagged 0 (``l``) or 1 (pivot). Real
  text, constructed labels; it stands in offline for the slot filling.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from polymnesia.continual.slots import slot_names, slot_records, tag_inventory
from polymnesia.data.prepared import read_split
from polymnesia.errors import DataError
from polymnesia.tasks.classification import build_sequence_examples
from polymnesia.tasks.config import TaskConfig, check_label_count, infer_num_labels
from polymnesia.tasks.tagging import build_token_examples, language_id_tagging


def load_examples(
    data_dir: Path,
    lang: str,
    split: str,
    task: TaskConfig,
    tokenizer: Any,
    *,
    cap: int | None,
    seed: int,
    pivot: str | None = None,
    slots: tuple[str, tuple[str, ...]] | None = None,
) -> list[dict[str, Any]]:
    """``cap`` evenly spaced records of ``lang``'s ``split`` as examples; one-line error if none.

    Evenly spaced, not the first ``cap``: prepared Bible records follow the
    book order, so a prefix would hold a single genre. Results are memoised
    per process (the runner runs every step stage of a run in one process, and
    each reads the same splits), keyed by folder, split, task and tokenizer.
    """
    key = (
        str(data_dir),
        lang,
        split,
        task.model_dump_json(),
        _tok_key(tokenizer),
        cap,
        seed,
        pivot,
        slots,
    )
    if key in _MEMO:
        return _MEMO[key]
    records = spread(read_split(data_dir, lang, split), cap)
    if task.kind == "sequence":
        examples = build_sequence_examples(records, tokenizer, task.max_length)
    else:
        tagged = _tagged(records, data_dir, split, seed=seed, pivot=pivot, slots=slots)
        examples = build_token_examples(
            tagged, tokenizer, task.max_length, echo=task.context == "echo"
        )
    if not examples:
        raise DataError(
            f"language '{lang}' has no labelled {split} examples for task '{task.name}' "
            f"(prepared records: {len(records)}); remove it or use a source that labels it"
        )
    _MEMO[key] = examples
    return examples


_MEMO: dict[tuple[Any, ...], list[dict[str, Any]]] = {}


def _tok_key(tokenizer: Any) -> str:
    return f"{getattr(tokenizer, 'name_or_path', '')}:{len(tokenizer)}"


def _tagged(
    records: list[dict[str, Any]],
    data_dir: Path,
    split: str,
    *,
    seed: int,
    pivot: str | None,
    slots: tuple[str, tuple[str, ...]] | None,
) -> list[dict[str, Any]]:
    """Token-task records with tags: from the slot annotations, else language-ID against
    ``pivot``.
    """
    if slots is not None:
        field, inventory = slots
        return slot_records(records, field, list(inventory))
    if pivot is None:
        raise DataError("a token task needs task_pivot: the language mixed into every example")
    return language_id_tagging(records, read_split(data_dir, pivot, split), seed)


def spread(records: list[dict[str, Any]], cap: int | None) -> list[dict[str, Any]]:
    """``cap`` records at evenly spaced positions (all of them when ``cap`` is None or larger)."""
    if cap is None or cap >= len(records):
        return list(records)
    return [records[i * len(records) // cap] for i in range(cap)]


def slot_tags(data_dir: Path, languages: list[str], field: str) -> tuple[str, ...]:
    """The BIO tag inventory of every slot in every split of ``languages`` (label ids in this
    order).

    The schema is the dataset's, so the test splits count too: a slot seen
    only in a test set still gets an id (it is then never predicted).
    """
    key = (str(data_dir), tuple(languages), field)
    if key not in _SLOT_MEMO:
        names: set[str] = set()
        for lang in languages:
            for split in ("train", "validation", "test"):
                names |= slot_names(read_split(data_dir, lang, split), field)
        _SLOT_MEMO[key] = tuple(tag_inventory(names))
    return _SLOT_MEMO[key]


_SLOT_MEMO: dict[tuple[Any, ...], tuple[str, ...]] = {}


def num_labels(
    task: TaskConfig, data_dir: Path, languages: list[str], slot_field: str | None = None
) -> int:
    """The configured count; the slot tag inventory's size, 2 for the language-ID tagging;
    else max label + 1 over the train data."""

    if slot_field is not None and task.kind == "token":
        n = len(slot_tags(data_dir, languages, slot_field))
        if task.num_labels is not None and task.num_labels != n:
            raise DataError(
                f"task.num_labels is {task.num_labels} but the slot annotations give {n} BIO tags; "
                "set it to null"
            )
        return n
    if task.kind == "token" and task.num_labels is None:
        return 2
    records = (r for lang in languages for r in read_split(data_dir, lang, "train"))
    if task.num_labels is not None:
        return check_label_count(task, task.num_labels, records)
    return infer_num_labels(records)

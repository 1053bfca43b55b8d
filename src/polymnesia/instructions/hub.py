"""Online instruction datasets by field mapping (the two-phase CFT paper: Alpaca, MultiAlpaca,
OpenOrca; Aya).

:func:`load_instruction_dataset` reads any Hugging Face instruction dataset
(by name, through the one Hub loader :func:`polymnesia.data.sources.hf.load_hf`:
one line when the Hub is unreachable), a local JSONL file, or an
already loaded ``datasets.Dataset`` / list of dicts, and maps its columns to
``instruction`` / ``input`` / ``output`` (and optionally ``lang``). A mapped
column the data does not have is one line naming it and the columns it has,
before any row is read. :data:`PRESETS` holds the configurations of the
paper's datasets (see docs/two_phase.md for how to use them).
:func:`hf_instructions` is the same reader for Aggarwal et al. 2024's ``instruct`` stage
(``source: hf``, OpenOrca), returning records without their language.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polymnesia.data.sources.hf import load_hf
from polymnesia.errors import DataError, unknown
from polymnesia.instructions.records import InstructionRecord, check_record
from polymnesia.io import read_jsonl

ROLES = ("instruction", "input", "output", "lang")


@dataclass(frozen=True)
class InstructionSource:
    """Where an instruction dataset is and how its columns map to ours."""

    name: str
    fields: dict[str, str]
    config: str | None = None
    split: str = "train"
    data_files: str | list[str] | None = None
    note: str = ""
    languages: list[str] = field(default_factory=list)


PRESETS: dict[str, InstructionSource] = {
    "alpaca": InstructionSource(
        "tatsu-lab/alpaca",
        {"instruction": "instruction", "input": "input", "output": "output"},
        note="52k English self-instruct records (Taori et al. 2023); Phase 1 of the two-phase "
        "CFT paper",
    ),
    "multialpaca": InstructionSource(
        "DAMO-NLP-MT/multialpaca",
        {"instruction": "instruction", "input": "input", "output": "output"},
        data_files=[
            f"{x}.jsonl" for x in ("ar", "de", "es", "fr", "id", "ja", "ko", "pt", "ru", "th", "vi")
        ],
        note="Alpaca's seed tasks in 11 languages (PolyLM); one file per language, "
        "data_files='fr.jsonl' for one language; Phase 2 of the two-phase CFT paper",
    ),
    "openorca": InstructionSource(
        "Open-Orca/OpenOrca",
        {"instruction": "system_prompt", "input": "question", "output": "response"},
        note="English FLAN questions with GPT-3.5/4 answers; an empty system prompt "
        "makes the question the instruction; Phase 1 alternative in the two-phase CFT paper "
        "(appendix A.2)",
    ),
    "aya": InstructionSource(
        "CohereForAI/aya_dataset",
        {"instruction": "inputs", "output": "targets", "lang": "language_code"},
        note="human-written prompts and answers in 65 languages (Singh et al. 2024); "
        "language_code is ISO 639-3 (fra, deu, ...); no English counterpart, so no ER",
    ),
}


def _columns(data: Any) -> list[str]:
    names = getattr(data, "column_names", None)
    if isinstance(names, list):
        return list(names)
    if isinstance(data, Sequence) and data and isinstance(data[0], Mapping):
        return list(data[0])
    return []


def map_rows(
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[str],
    fields: Mapping[str, str],
    *,
    where: str,
    limit: int | None = None,
    languages: Sequence[str] | None = None,
) -> list[tuple[InstructionRecord, str | None]]:
    """``(record, lang)`` per row, after checking every mapped column exists in ``columns``."""
    bad_roles = [r for r in fields if r not in ROLES]
    if bad_roles:
        raise DataError(f"{where}: unknown field role(s) {bad_roles}; accepted: {', '.join(ROLES)}")
    for role in ("instruction", "output"):
        if role not in fields:
            raise DataError(f"{where}: no column mapped to '{role}' (fields: {dict(fields)})")
    missing = [
        f"'{col}' (mapped to '{role}')" for role, col in fields.items() if col not in columns
    ]
    if missing:
        raise DataError(
            f"{where} has no column {', '.join(missing)}; its columns: "
            f"{', '.join(columns) or 'none'}"
        )
    if languages and "lang" not in fields:
        raise DataError(f"{where}: filtering by language needs a column mapped to 'lang'")
    out: list[tuple[InstructionRecord, str | None]] = []
    for i, row in enumerate(rows):
        if limit and len(out) >= limit:
            break
        lang = str(row[fields["lang"]]) if "lang" in fields else None
        if languages and lang not in languages:
            continue
        rec = {k: row.get(col) for k, col in fields.items() if k != "lang"}
        if not str(rec.get("instruction") or "").strip() and rec.get("input"):
            rec["instruction"], rec["input"] = rec["input"], ""
        out.append((check_record(rec, f"{i} of {where}"), lang))
    return out


def load_instruction_dataset(
    source: str | Path | Any,
    *,
    preset: str | None = None,
    fields: Mapping[str, str] | None = None,
    config: str | None = None,
    split: str = "train",
    data_files: str | list[str] | None = None,
    limit: int | None = None,
    languages: Sequence[str] | None = None,
) -> list[tuple[InstructionRecord, str | None]]:
    """Instruction records (with their language when a ``lang`` column is mapped).

    ``source``: a Hub dataset name, a ``.jsonl`` path, a ``datasets.Dataset``
    or a list of dicts. ``preset`` (a key of :data:`PRESETS`) fills name,
    fields, config and data files; explicit arguments override it.
    """

    base = PRESETS[preset] if preset else None
    if preset and base is None:
        raise unknown("instruction dataset preset", preset, PRESETS)
    if preset and base is not None:
        fields = {**base.fields, **(fields or {})}
        config = config or base.config
        data_files = data_files or base.data_files
        source = source or base.name
    m = dict(fields or {"instruction": "instruction", "input": "input", "output": "output"})
    if isinstance(source, (str, Path)) and str(source).endswith(".jsonl"):
        if not Path(source).exists():
            raise DataError(f"no instruction file {source}")
        data: Any = read_jsonl(Path(source))
        where = f"instruction file {source}"
    elif isinstance(source, str):
        data = load_hf(source, config, split, False, data_files)
        where = f"instruction dataset '{source}'"
    else:
        data, where = source, "instruction dataset"
    return map_rows(data, _columns(data), m, where=where, limit=limit, languages=languages)


def hf_instructions(
    name: str,
    *,
    config: str | None = None,
    split: str = "train",
    fields: Mapping[str, str] | None = None,
    limit: int | None = None,
) -> list[InstructionRecord]:
    """Records of a Hub dataset; ``fields`` maps instruction/input/output to its columns
    (unmapped roles keep their own name).

    OpenOrca: ``{"instruction": "system_prompt", "input": "question", "output": "response"}``
    (an empty system prompt falls back to the question alone); Alpaca: the identity.
    """

    m = {"instruction": "instruction", "input": "input", "output": "output", **(fields or {})}
    rows = load_instruction_dataset(name, fields=m, config=config, split=split, limit=limit)
    return [rec for rec, _ in rows]

"""Train/validation/test splits drawn by aligned id, identical in every language.

Khelli et al. 2025 and Mao et al. 2022 measure cross-lingual
transfer and forgetting on held-out data; if a translation of a test text
were trained on in another language, transfer would be overstated. So the
split of a record is a pure function of its *aligned* id (or of its
``meta["split_group"]`` when a source groups several ids, e.g. the
paragraphs of one UDHR article) and a seed: the same text lands in the same
split in every language, in every run, on every machine.

The draw hashes ``f"{seed}:{key}"`` with SHA-256 (Python's ``hash`` is
salted per process) and maps the first 8 bytes to a number in [0, 1).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from typing import Literal

from polymnesia.data.records import TextRecord
from polymnesia.errors import ConfigError

Split = Literal["train", "validation", "test"]
SPLITS: tuple[Split, Split, Split] = ("train", "validation", "test")
DEFAULT_FRACTIONS: tuple[float, float, float] = (0.8, 0.1, 0.1)


def check_fractions(fractions: Iterable[float]) -> tuple[float, float, float]:
    """Validate (train, validation, test) fractions: three non-negative numbers summing to 1."""
    values = tuple(fractions)
    ok = (
        len(values) == 3
        and all(isinstance(v, int | float) and math.isfinite(v) and v >= 0 for v in values)
        and abs(sum(values) - 1.0) < 1e-6
    )
    if not ok:
        raise ConfigError(
            f"split fractions must be three non-negative numbers (train, validation, test) "
            f"summing to 1, got {list(values)}"
        )
    return (float(values[0]), float(values[1]), float(values[2]))


def unit_hash(key: str, seed: int = 0) -> float:
    """A stable number in [0, 1) for ``key`` and ``seed`` (SHA-256, not Python's ``hash``)."""
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def assign_split(
    aligned_id: str,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
    seed: int = 0,
) -> Split:
    """The split of an aligned id: ``train`` if u < f_train, ``validation`` if u < f_train +
    f_val.
    """
    train, validation, _ = check_fractions(fractions)
    u = unit_hash(aligned_id, seed)
    if u < train:
        return "train"
    return "validation" if u < train + validation else "test"


def split_key(record: TextRecord) -> str:
    """What a record's split is drawn from: ``meta["split_group"]`` if set, else its id."""
    return str(record.meta.get("split_group", record.id))


def split_records(
    records: Iterable[TextRecord],
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
    seed: int = 0,
) -> dict[str, list[TextRecord]]:
    """Partition records into ``{"train": [...], "validation": [...], "test": [...]}``, order
    kept.
    """
    fractions = check_fractions(fractions)
    out: dict[str, list[TextRecord]] = {name: [] for name in SPLITS}
    for record in records:
        out[assign_split(split_key(record), fractions, seed)].append(record)
    return out

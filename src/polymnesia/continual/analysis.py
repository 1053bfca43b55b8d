"""Language analysis of Khelli et al. 2025 (section 5): script, family, resource class, donors and
receivers.

Groups come from the language table (:mod:`polymnesia.data.languages`).
Resource classes follow Table 1's "Language Vitality" columns with the Joshi
et al. 2020 classes each holds: Low = classes 0-2, Mid = 3, High = 4-5
(:func:`polymnesia.data.languages.level_of_class`). Section 5's donor/receiver
reading: MFT (eq. 13) measures how much a language *donates* to later ones,
MBT (eq. 14) how well it *receives* (keeps its knowledge) under later training.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

import numpy as np

from polymnesia.data.languages import get_language

GroupBy = Literal["script", "family", "resource"]
#: Table 1's vitality columns and the Joshi classes each holds
RESOURCE_COLUMNS: dict[str, str] = {"Low": "0-2", "Mid": "3", "High": "4-5"}


def group_of(lang: str, by: GroupBy) -> str:
    """``Latin``/``non-Latin``, the family, or ``Low``/``Mid``/``High`` for one language."""
    info = get_language(lang)
    if by == "script":
        return "Latin" if info.script.lower().startswith("latin") else "non-Latin"
    if by == "family":
        return info.family
    return {"low": "Low", "mid": "Mid", "high": "High"}[info.resource_level]


def group_means(values: Mapping[str, float], by: GroupBy) -> dict[str, float]:
    """Mean of ``values`` (per language) within each group, NaN values left out."""
    buckets: dict[str, list[float]] = {}
    for lang, v in values.items():
        if not math.isnan(v):
            buckets.setdefault(group_of(lang, by), []).append(float(v))
    return {g: float(np.mean(v)) for g, v in sorted(buckets.items())}


def hop_average(per_lang: Mapping[str, np.ndarray]) -> dict[str, float]:
    """Mean over hops of each language's MFT_h or MBT_h (NaN hops left out), the sort key of Figures
    5-6.
    """
    out = {}
    for lang, v in per_lang.items():
        arr = np.asarray(v, dtype=float)
        out[lang] = float(arr[~np.isnan(arr)].mean()) if np.any(~np.isnan(arr)) else math.nan
    return out


def ranking(values: Mapping[str, float]) -> list[tuple[str, float]]:
    """Languages by descending value, NaN last: the donor (MFT) or receiver (MBT) ranking."""
    return sorted(
        values.items(),
        key=lambda kv: (math.isnan(kv[1]), -kv[1] if not math.isnan(kv[1]) else 0.0, kv[0]),
    )

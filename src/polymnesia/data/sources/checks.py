"""Validation-time checks of a data section: source options and split fractions.

A source takes its options as keyword arguments; an unknown key used to
surface as a ``TypeError`` inside the source's constructor when the data
stage ran. :func:`check_source_options` refuses it at validation, naming the
options the source accepts, and lets the source check what it can without
reading the data (a local path that must exist). :func:`check_split_fractions`
refuses fractions that leave the training, validation or test split empty.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from polymnesia.data.sources.base import check_source_options
from polymnesia.errors import ConfigError

__all__ = ["check_data_section", "check_source_options", "check_split_fractions"]


def check_split_fractions(fractions: Sequence[float], key: str = "data.split_fractions") -> None:
    """Train in (0, 1), validation and test above 0, summing to 1."""
    values = list(fractions)
    ok = (
        len(values) == 3
        and all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        and all(math.isfinite(v) for v in values)
        and 0 < values[0] < 1
        and values[1] > 0
        and values[2] > 0
        and abs(sum(values) - 1.0) < 1e-6
    )
    if not ok:
        raise ConfigError(
            f"bad value for '{key}': {values}: give three fractions (train, validation, test), "
            "each above 0, summing to 1, so that no split is empty"
        )


def check_data_section(section: Any, path: str = "data") -> None:
    """Check a validated data section (``source``, ``options``, ``split_fractions``)."""
    check_source_options(section.source, section.options, f"{path}.options")
    check_split_fractions(section.split_fractions, f"{path}.split_fractions")

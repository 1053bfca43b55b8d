"""Argument types shared by the commands (argparse prints their refusals in one line)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def amount(unit: str) -> Callable[[str], float]:
    """An argparse type: a finite, non-negative number of ``unit`` (seconds, days)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a number of {unit}") from None
        if not math.isfinite(value) or value < 0:
            raise argparse.ArgumentTypeError(f"'{text}': give a finite number of {unit} >= 0")
        return value

    return parse

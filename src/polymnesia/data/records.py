"""The record every data source yields."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TextRecord:
    """One text in one language.

    ``id`` is the *aligned* id: the same id in two languages names translations
    of each other (a verse id ``"40.1.1"``, a UDHR paragraph ``"a1.p1"``).
    Splits are drawn by this id so no translation of a test text is trained on.
    """

    id: str
    lang: str
    text: str
    label: int | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

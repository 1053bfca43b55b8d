"""Record builder shared by the task tests (a uniquely named module, importable from
tests/tasks).
"""

from __future__ import annotations

from typing import Any


def record(i: int, lang: str, text: str, label: int | None, **meta: object) -> dict[str, Any]:
    return {"id": f"1.1.{i}", "lang": lang, "text": text, "label": label, "meta": dict(meta)}

"""Checks every validated config gets, whatever its protocol.

- ``name`` becomes a folder name (``runs/NAME-HASH``): it must be a safe file
  name (:func:`check_safe_name`), so ``../x`` or ``/tmp/x`` cannot write
  outside ``runs/``.
- every data section (a section with ``source``, ``options`` and
  ``split_fractions``) is checked against its source: unknown options are
  refused naming the source's accepted options, a local source's path must
  exist, and the split fractions must leave every split non-empty
  (:mod:`polymnesia.data.sources.checks`).

These run after the protocol's typed config validated, at ``validate``,
``run --dry-run`` and ``run``. (They walk the config rather than live in the
data section's validator because the sections are being moved into the
per-protocol packages; the data-section check can become a validator there.)
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel

from polymnesia.errors import ConfigError

_UNSAFE = re.compile(r"[/\\\x00-\x1f\x7f]")


def check_safe_name(value: str, what: str) -> str:
    """A name used as a file or folder name: no ``/``, ``\\``, control characters, ``.``, ``..``."""
    if (
        not isinstance(value, str)
        or not value.strip()
        or value in (".", "..")
        or value.startswith(("-", "."))
        or _UNSAFE.search(value)
        or len(value) > 120
    ):
        raise ConfigError(
            f"bad value for '{what}': {value!r}: it names a folder, so it must be a non-empty "
            "file name of at most 120 characters without '/', '\\\\' or control characters, "
            "not starting with '.' or '-'"
        )
    return value


def _data_sections(model: BaseModel, path: str = "") -> list[tuple[str, BaseModel]]:
    found: list[tuple[str, BaseModel]] = []
    fields = type(model).model_fields
    if {"source", "options", "split_fractions"} <= set(fields):
        found.append((path, model))
    for name in fields:
        value = getattr(model, name, None)
        items = value if isinstance(value, list) else [value]
        for i, item in enumerate(items):
            if isinstance(item, BaseModel):
                sub = f"{path}.{name}" if path else name
                found.extend(_data_sections(item, f"{sub}.{i}" if value is items else sub))
    return found


def check_sections(cfg: Any, source: str = "") -> None:
    """Run the protocol-independent checks on a validated config (one ConfigError line)."""
    where = f"{source}: " if source else ""
    try:
        if hasattr(cfg, "name"):
            check_safe_name(cfg.name, "name")
        if isinstance(cfg, BaseModel):
            from polymnesia.data.sources.checks import check_data_section

            for path, section in _data_sections(cfg):
                check_data_section(section, path)
    except ConfigError as e:
        raise ConfigError(f"{where}{e}") from None

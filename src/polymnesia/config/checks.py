"""Names that become file or folder names (a run's ``name``, stage names) must be safe:
``../x`` or ``/tmp/x`` cannot write outside ``runs/`` (:func:`check_safe_name`); patterns
must compile when the config is read, not at their stage (:func:`check_regex`)."""

from __future__ import annotations

import re

from polymnesia.errors import ConfigError

_UNSAFE = re.compile(r"[/\\\x00-\x1f\x7f]")
#: the longest name in UTF-8 bytes: file systems limit a folder name to 255 bytes (not
#: characters: 70 emoji are 280 bytes), and a run folder adds ``-HASH8`` to its name
MAX_NAME_BYTES = 200


def check_safe_name(value: str, what: str) -> str:
    """A name used as a file or folder name: no ``/``, ``\\``, control characters, ``.``, ``..``,
    and short enough in bytes for any file system (:data:`MAX_NAME_BYTES`)."""
    if (
        not isinstance(value, str)
        or not value.strip()
        or value in (".", "..")
        or value.startswith(("-", "."))
        or _UNSAFE.search(value)
        or len(value) > 120
        or len(value.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES
    ):
        raise ConfigError(
            f"bad value for '{what}': {value!r}: it names a folder, so it must be a non-empty "
            f"file name of at most 120 characters and {MAX_NAME_BYTES} bytes in UTF-8, without "
            "'/', '\\\\' or control characters, not starting with '.' or '-'"
        )
    return value


def check_regex(value: str | None) -> str | None:
    """A regular expression in Python's ``re`` syntax that compiles (``None`` passes); a
    ``ValueError`` otherwise, which pydantic reports under the field's key."""
    if value is None:
        return value
    try:
        re.compile(value)
    except re.error as e:
        raise ValueError(
            f"not a regular expression ({e}); patterns use Python's re syntax and are searched "
            r"in parameter names, e.g. 'self_attn\.(q|k|v)_proj'"
        ) from None
    return value

"""Where polymnesia keeps its caches."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """The cache root: ``$POLYMNESIA_CACHE``, else ``$XDG_CACHE_HOME/polymnesia``, else
    ``~/.cache/polymnesia``.
    """
    env = os.environ.get("POLYMNESIA_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "polymnesia"


def looks_local(name: str) -> bool:
    """A filesystem path rather than a Hub id (``org/name``): ``./x``, ``/x``, ``~/x``,
    ``a/b/c``.
    """
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or "\\" in name

"""Import every module of a package so the classes in it register themselves.

New stages, experiments and training methods need no edit to a shared list:
a module dropped into ``stages/``, ``experiments/`` or ``methods/`` is found.
"""

from __future__ import annotations

import importlib
import pkgutil


def import_submodules(package: str) -> None:
    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{package}.{info.name}")

"""Import every module of a package so the classes in it register themselves.

New stages, experiments and training methods need no edit to a shared list:
a module dropped into ``stages/`` or ``methods/`` is found, and a protocol package dropped
into ``experiments/`` (:func:`import_each`).
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil


def import_submodules(package: str) -> None:
    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{package}.{info.name}")


def import_each(package: str, module: str) -> None:
    """Import ``package.SUB.module`` for every subpackage ``SUB`` of ``package`` that has one
    (each protocol's ``protocol``, with its stages; its ``config`` is imported alone, by
    :class:`~polymnesia.registry.ModuleRegistry`)."""
    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.ispkg and not info.name.startswith("_"):
            name = f"{package}.{info.name}.{module}"
            if importlib.util.find_spec(name) is not None:
                importlib.import_module(name)

"""One small registry for everything chosen by name in a config.

Stages, data sources, combiners, metrics, training plugins, continual-learning
methods, model presets, languages and experiments each live in a
:class:`Registry`. There is one registration mechanism: an entry registers
itself when its module is imported (``@REGISTRY.register(name, description)``),
and the package that holds the entries imports all of its modules
(:func:`polymnesia.registry_imports.import_submodules` in its ``__init__``).
A registry names that package, and imports it the first time it is asked for
an entry, so a lookup never misses an entry whose module nobody imported yet.
``polymnesia ls`` lists every registry (:func:`all_registries`).

>>> combiners = Registry("combiner", "combiners")
>>> @combiners.register("mean", "average of the rows")
... def mean(x): ...
>>> combiners.get("mean") is mean
True
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from polymnesia.errors import unknown

T = TypeVar("T")

_ALL: dict[str, Registry[Any]] = {}


@dataclass(frozen=True)
class Entry(Generic[T]):
    name: str
    obj: T
    description: str


class Registry(Generic[T]):
    """A named table of objects with descriptions and helpful lookup errors.

    ``kind`` names one entry in messages ("stage"); ``category`` names the list
    in ``polymnesia ls`` ("stages"); ``package`` is the package (or module) whose import
    registers the entries (imported on first lookup). ``listed=False`` keeps a registry out of
    ``polymnesia ls`` (one that mirrors another: each protocol's config class).
    """

    def __init__(
        self,
        kind: str,
        category: str | None = None,
        package: str | None = None,
        *,
        listed: bool = True,
    ) -> None:
        self.kind = kind
        self.category = category or f"{kind}s"
        self.package = package
        self._entries: dict[str, Entry[T]] = {}
        self._loaded = package is None
        if listed:
            _ALL[self.category] = self

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True  # before the import: modules register while it runs
            assert self.package is not None
            importlib.import_module(self.package)

    def register(self, name: str, description: str = "") -> Callable[[T], T]:
        """Decorator registering ``obj`` under ``name`` (first docstring line if no description)."""

        def decorator(obj: T) -> T:
            self.add(name, obj, description)
            return obj

        return decorator

    def add(self, name: str, obj: T, description: str = "") -> None:
        if name in self._entries and self._entries[name].obj is not obj:
            raise ValueError(f"{self.kind} '{name}' is already registered")
        if not description:
            doc = getattr(obj, "__doc__", None) or ""
            description = doc.strip().splitlines()[0] if doc.strip() else ""
        self._entries[name] = Entry(name, obj, description)

    def get(self, name: str) -> T:
        self._load()
        try:
            return self._entries[name].obj
        except KeyError:
            raise unknown(self.kind, name, self._entries) from None

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self) -> Iterator[Entry[T]]:
        self._load()
        return iter(sorted(self._entries.values(), key=lambda e: e.name))

    def names(self) -> list[str]:
        self._load()
        return sorted(self._entries)


class ModuleRegistry(Registry[T]):
    """A registry with one module per entry: entry ``NAME`` is registered by the module
    ``template.format(name=NAME)``, imported on the first lookup of that name alone. The
    names are the subpackages of ``package`` that have such a module, found without
    importing them (each protocol's config: reading a quickstart config imports the
    language-modelling config module, not the other protocols' sections)."""

    def __init__(
        self, kind: str, category: str, package: str, template: str, *, listed: bool = False
    ) -> None:
        super().__init__(kind, category, None, listed=listed)
        self.package, self.template = package, template

    def names(self) -> list[str]:
        pkg = importlib.import_module(str(self.package))
        return sorted(
            info.name
            for info in pkgutil.iter_modules(pkg.__path__)
            if info.ispkg
            and not info.name.startswith("_")
            and importlib.util.find_spec(self.template.format(name=info.name)) is not None
        )

    def get(self, name: str) -> T:
        if name not in self._entries and name in self.names():
            importlib.import_module(self.template.format(name=name))
        return super().get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self.names()

    def __iter__(self) -> Iterator[Entry[T]]:
        for name in self.names():
            self.get(name)
        return super().__iter__()


def all_registries() -> dict[str, Registry[Any]]:
    """Every registry created so far, by category (``polymnesia ls`` imports the library first)."""
    return dict(sorted(_ALL.items()))

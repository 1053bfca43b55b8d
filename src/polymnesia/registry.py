"""One small registry for everything chosen by name in a config.

Stages, data sources, combiners, metrics, model presets and experiments each
live in a :class:`Registry`; YAML picks entries by name, ``polymnesia ls``
lists them with their one-line descriptions.

>>> combiners = Registry("combiner")
>>> @combiners.register("mean", "average of the rows")
... def mean(x): ...
>>> combiners.get("mean") is mean
True
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from polymnesia.errors import unknown

T = TypeVar("T")


@dataclass(frozen=True)
class Entry(Generic[T]):
    name: str
    obj: T
    description: str


class Registry(Generic[T]):
    """A named table of objects with descriptions and helpful lookup errors."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Entry[T]] = {}

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
        try:
            return self._entries[name].obj
        except KeyError:
            raise unknown(self.kind, name, self._entries) from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[Entry[T]]:
        return iter(sorted(self._entries.values(), key=lambda e: e.name))

    def names(self) -> list[str]:
        return sorted(self._entries)

"""The data-source interface and its registry."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Any

from polymnesia.data.records import TextRecord
from polymnesia.registry import Registry


class Source(ABC):
    """A corpus of texts per language.

    Subclasses register themselves with ``@SOURCES.register(name, description)``
    and take their options as keyword arguments (from the YAML ``source`` block).
    """

    name: str = ""
    #: one line on licences, shown by ``polymnesia data info``
    licence: str = ""

    def fetch(self) -> None:  # noqa: B027 - optional hook
        """Bring the corpus into the local cache (no-op for packaged corpora)."""

    @abstractmethod
    def languages(self) -> list[str]:
        """Language codes this source offers (ISO 639-1 where one exists, else 639-3)."""

    @abstractmethod
    def records(self, lang: str) -> Iterator[TextRecord]:
        """All cleaned records of ``lang`` in a deterministic order."""

    def info(self) -> dict[str, Any]:
        """Languages, sizes and licence notes for ``polymnesia data info``."""
        return {"name": self.name, "licence": self.licence, "languages": self.languages()}


SOURCES: Registry[type[Source]] = Registry("data source", "sources", "polymnesia.data.sources")


def get_source(name: str, /, **options: Any) -> Source:
    """Build a registered source by name."""
    return SOURCES.get(name)(**options)

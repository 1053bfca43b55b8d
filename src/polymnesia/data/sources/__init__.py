"""Data sources, registered by name (``polymnesia ls sources``)."""

from polymnesia.data.sources.base import SOURCES, Source, get_source

__all__ = ["SOURCES", "Source", "get_source"]

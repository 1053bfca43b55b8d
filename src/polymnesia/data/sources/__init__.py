"""Data sources, registered by name (``polymnesia ls sources``); importing this package
registers every module in it."""

from polymnesia.data.sources.base import SOURCES, Source, get_source
from polymnesia.registry_imports import import_submodules

import_submodules(__name__)

__all__ = ["SOURCES", "Source", "get_source"]

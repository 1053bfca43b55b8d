"""Importing this module registers every metric in :data:`~polymnesia.metrics.base.METRICS`
(each module of the package; ``METRICS`` imports it on its first lookup). The package itself
imports only :mod:`polymnesia.metrics.base`, so a config section that reads a confidence
level (:mod:`polymnesia.items`) does not import the metrics that need torch."""

from polymnesia.registry_imports import import_submodules

import_submodules("polymnesia.metrics")

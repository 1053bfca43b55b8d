"""Metrics as pure functions, registered by name (``polymnesia ls metrics``).

Metrics take tensors, arrays and numbers, never models: code that runs a model
to get those numbers lives in :mod:`polymnesia.evaluation`.
"""

from polymnesia.metrics.base import METRICS, MetricInfo, register_metric
from polymnesia.registry_imports import import_submodules

import_submodules(__name__)

__all__ = ["METRICS", "MetricInfo", "register_metric"]

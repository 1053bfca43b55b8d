"""Metrics as pure functions, registered by name (``polymnesia ls metrics``).

Metrics take tensors, arrays and numbers, never models: code that runs a model
to get those numbers lives in :mod:`polymnesia.evaluation`. The registry imports every
metric module on its first lookup (:mod:`polymnesia.metrics.registered`); the package imports
only :mod:`polymnesia.metrics.base`.
"""

from polymnesia.metrics.base import METRICS, MetricInfo, register_metric

__all__ = ["METRICS", "MetricInfo", "register_metric"]

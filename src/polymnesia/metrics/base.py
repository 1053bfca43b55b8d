"""The metric registry and its decorator (``polymnesia ls metrics``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from polymnesia.registry import Registry


@dataclass(frozen=True)
class MetricInfo:
    fn: Callable[..., Any]
    higher_is_better: bool


METRICS: Registry[MetricInfo] = Registry("metric", "metrics", "polymnesia.metrics")


def register_metric(
    name: str, *, higher_is_better: bool, description: str = ""
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a metric function under ``name``; the function is returned unchanged."""

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        doc = (fn.__doc__ or "").strip().splitlines()
        METRICS.add(name, MetricInfo(fn, higher_is_better), description or (doc[0] if doc else ""))
        return fn

    return decorator

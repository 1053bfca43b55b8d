"""The metric registry and its decorator (``polymnesia ls metrics``).

A registration also says how the metric is recomputed on resampled test items: ``items``
maps an item kind (:mod:`polymnesia.items`: ``lm``, ``label``, ``token``, ``stats``) to a
rule that turns that kind's columns into an
:class:`~polymnesia.metrics.uncertainty.ItemStatistic`. Intervals and paired tests over
items then follow from the registration alone, with no switch elsewhere::

    @register_metric(
        "bits_per_byte", higher_is_better=False, items={"lm": ratio_of("nll", "bytes", scale=1 /
        LN2)}
    )
    def bits_per_byte(nll_sum, n_bytes): ...

Kinds ``values`` (a score per item) and ``docs`` (lm-eval's per-document columns) need no
rule: any metric is the mean of its column.

The registration is also what a stage and a report read: a stage that writes items of a kind
scores every metric registered for that kind (:func:`scored_metrics`; ``by_name_only`` keeps
a metric out, for the pretraining losses a stage picks by the model's objective), and a
table takes the metric's ``title`` (:func:`metric_title`) and its direction
(:func:`metric_direction`) from it, so a new metric reaches every table of its kind with no
other edit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from polymnesia.metrics.uncertainty import (
    ItemStatistic,
    accuracy_statistic,
    macro_f1_statistic,
    ratio_statistic,
    sum_statistic,
)
from polymnesia.registry import Registry

#: a metric on one kind of items: ``(columns, n_labels) -> ItemStatistic``
ItemRule = Callable[[Mapping[str, np.ndarray], "int | None"], ItemStatistic]


@dataclass(frozen=True)
class MetricInfo:
    fn: Callable[..., Any]
    higher_is_better: bool
    #: item kind -> how the metric is recomputed on resampled items of that kind
    items: Mapping[str, ItemRule] = field(default_factory=dict)
    #: the metric's name in tables and figures, as it reads inside a sentence
    title: str = ""
    #: scored only where a stage names it, not by every stage writing items of its kinds
    by_name_only: bool = False


METRICS: Registry[MetricInfo] = Registry("metric", "metrics", "polymnesia.metrics.registered")


def register_metric(
    name: str,
    *,
    higher_is_better: bool,
    description: str = "",
    items: Mapping[str, ItemRule] | None = None,
    title: str = "",
    by_name_only: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a metric function under ``name`` (and, in ``items``, how it is resampled);
    the function is returned unchanged.

    ``title`` names the metric in tables and figures as it reads inside a sentence ("bits per
    byte", "BLEU"; default: ``name``); a table that starts with it capitalises its first
    letter. Every stage that writes items of a kind in ``items`` scores the metric, unless
    ``by_name_only`` (then only a stage that names it does)."""

    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        doc = (fn.__doc__ or "").strip().splitlines()
        info = MetricInfo(fn, higher_is_better, dict(items or {}), title or name, by_name_only)
        METRICS.add(name, info, description or (doc[0] if doc else ""))
        return fn

    return decorator


def item_rule(metric: str, kind: str) -> ItemRule | None:
    """How ``metric`` is recomputed on items of ``kind`` (None: its registration says not)."""
    return METRICS.get(metric).items.get(kind) if metric in METRICS else None


def item_kinds(kind: str) -> list[str]:
    """The metrics registered with a rule for items of ``kind``."""
    return [e.name for e in METRICS if kind in e.obj.items]


def scored_metrics(kind: str) -> list[str]:
    """The metrics a stage that writes items of ``kind`` scores, in name order: those
    registered with a rule for ``kind``, less the ``by_name_only`` ones."""
    return [e.name for e in METRICS if kind in e.obj.items and not e.obj.by_name_only]


def metric_title(metric: str, *, start: bool = False) -> str:
    """The registered ``title`` of ``metric`` (its name if it is not registered); ``start``
    capitalises the first letter, for a title or a label that begins with it."""
    title = METRICS.get(metric).title if metric in METRICS else metric
    return title[:1].upper() + title[1:] if start else title


def metric_direction(metric: str) -> bool | None:
    """Whether higher is better for ``metric`` (its registration); None where it is not
    registered."""
    return METRICS.get(metric).higher_is_better if metric in METRICS else None


# -- rules, one per shape of per-item evidence ------------------------------------------


def ratio_of(
    num: str, den: str, *, scale: float = 1.0, exp: bool = False, name: str = ""
) -> ItemRule:
    """``sum(num) / sum(den)`` over items (times ``scale``, then ``exp`` if asked)."""
    return lambda c, _n: ratio_statistic(c[num], c[den], scale=scale, exp=exp, name=name or num)


def accuracy_of(pred: str = "pred", gold: str = "gold") -> ItemRule:
    """The share of items whose prediction equals the gold label."""
    return lambda c, _n: accuracy_statistic(c[pred], c[gold])


def macro_f1_of(pred: str = "pred", gold: str = "gold") -> ItemRule:
    """Macro F1 over the labels (``n_labels`` of the item set)."""
    return lambda c, n: macro_f1_statistic(c[pred], c[gold], n)


def summed(
    columns: str | tuple[str, ...], reduce: Callable[[np.ndarray], np.ndarray], name: str
) -> ItemRule:
    """``reduce`` of per-item statistics summed over items (``[B, k] -> [B]``): one column
    holding a list per item (``stats``), or several scalar columns stacked."""
    if isinstance(columns, str):
        col = columns
        return lambda c, _n: sum_statistic(c[col], reduce, name)
    cols = columns
    return lambda c, _n: sum_statistic(np.stack([c[k] for k in cols], axis=1), reduce, name)

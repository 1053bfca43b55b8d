"""Table cells with their uncertainty, from score records: per language, per group, per seed.

Which interval a cell gets, in order of preference:

1. several seeds: the caller's interval over seeds and items when
   it gives one (:func:`polymnesia.items.group_intervals` of seed-tagged item
   sets), else the Student-t interval over seeds (the seeds are the
   repetitions the protocol ran; :func:`~polymnesia.metrics.seed_tests.seed_interval`);
2. one seed, an interval supplied by the caller (a stratified bootstrap over
   the items of a group's languages, :func:`polymnesia.items.group_intervals`);
3. one seed, one record with ``ci_low``/``ci_high`` (the stage's bootstrap over
   test items);
4. one seed, a mean of several records that all carry intervals: the normal
   approximation of a mean of independent languages
   (:func:`~polymnesia.metrics.seed_tests.combine_independent`);
5. otherwise the bare value: no "±" at all.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from polymnesia.errors import DataError
from polymnesia.metrics.seed_items import SEEDS_AND_ITEMS
from polymnesia.metrics.seed_tests import combine_independent, seed_interval
from polymnesia.metrics.uncertainty import Interval
from polymnesia.reports.table_core import Estimate
from polymnesia.results import Score, filter_scores, group_scores, mean, unique

Cell = float | Estimate


def per_seed(records: Sequence[Score]) -> dict[int | None, float]:
    """Mean value per seed (repeated records of one seed, e.g. languages, averaged first)."""
    return {k[0]: mean([s.value for s in g]) for k, g in group_scores(records, "seed").items()}


def record_interval(s: Score) -> Interval | None:
    """The interval a score record carries, if any."""
    if not s.has_ci:
        return None
    assert s.ci_low is not None and s.ci_high is not None
    n = s.n if s.n is not None else 0
    return Interval(s.value, s.ci_low, s.ci_high, n, method="bootstrap over test items")


def language_cell(records: Sequence[Score], level: float = 0.95) -> Cell:
    """One model in one language: seeds first, then the record's own interval."""
    if not records:
        return math.nan
    seeds = per_seed(records)
    if len(seeds) >= 2:
        return Estimate.of(seed_interval(list(seeds.values()), level))
    value = mean([s.value for s in records])
    iv = record_interval(records[0]) if len(records) == 1 else None
    return Estimate.of(iv, value) if iv is not None else value


def mean_cell(
    by_lang: Mapping[str, Sequence[Score]],
    interval: Interval | None = None,
    level: float = 0.95,
) -> Cell:
    """A mean over languages (each averaged over its records first), with its uncertainty."""
    langs = [recs for recs in by_lang.values() if recs]
    if not langs:
        return math.nan
    value = mean([mean([s.value for s in recs]) for recs in langs])
    seeds = [per_seed(recs) for recs in langs]
    common = set.intersection(*(set(s) for s in seeds))
    if len(common) >= 2 and all(len(s) == len(common) for s in seeds):
        if interval is not None and interval.method.startswith(SEEDS_AND_ITEMS):
            return Estimate.of(interval, value)  # seeds and items resampled together
        by_seed = [mean([s[k] for s in seeds]) for k in sorted(common, key=str)]
        return Estimate.of(seed_interval(by_seed, level), value)
    if interval is not None:
        return Estimate.of(interval, value)
    ivs = [record_interval(recs[0]) if len(recs) == 1 else None for recs in langs]
    known = [iv for iv in ivs if iv is not None]
    if len(known) == len(ivs):
        got = combine_independent(known, level)
        return Estimate.of(got if len(ivs) > 1 else known[0], value)
    return value


def uncertainty_note(cells: Iterable[Any], level: float = 0.95) -> str:
    """A caption sentence saying what "±" means in these cells (empty if nothing is an estimate)."""
    estimates = [c for c in cells if isinstance(c, Estimate)]
    methods = sorted({_short(c.method) for c in estimates if c.has_ci and c.spread is None})
    if methods:
        return f"± is half the width of the {level:.0%} confidence interval ({'; '.join(methods)})."
    return ""


def _short(method: str) -> str:
    if method.startswith("t-interval"):
        return "Student t over seeds"
    if method.startswith(SEEDS_AND_ITEMS):
        return "training seeds (Student t) and test items (bootstrap)"
    if method.startswith("stratified"):
        return "bootstrap over test items, resampled within each language"
    if method.startswith("normal approximation"):
        return "group means: normal approximation from per-language bootstrap intervals"
    return "bootstrap over test items" if "bootstrap" in method else method or "interval"


def _single(scores: Sequence[Score], name: str, what: str) -> None:
    values = unique(scores, name)
    if len(values) > 1:
        shown = ", ".join(str(v) for v in values)
        raise DataError(
            f"{what} got scores of several {name}s ({shown}); select one with "
            f"filter_scores({name}=...)"
        )


def metric_scores(
    scores: Sequence[Score], metric: str, what: str, *, tasks_apart: bool = False
) -> list[Score]:
    """The scores of ``metric``; none, or several tasks (unless ``tasks_apart``: the table
    keeps them apart, a row or column per task), is a :class:`DataError` naming ``what``."""
    chosen = filter_scores(scores, metric=metric)
    if not chosen:
        metrics = ", ".join(str(m) for m in unique(scores, "metric")) or "none"
        raise DataError(f"{what}: no scores for metric '{metric}'; present: {metrics}")
    if not tasks_apart:
        _single(chosen, "task", what)
    return chosen

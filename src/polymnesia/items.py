"""Per-item evidence behind score records: what intervals and paired tests resample.

A :class:`~polymnesia.results.Score` is one number per (model, language,
metric); the :class:`ItemSet` behind it keeps one row per test item, as
columns, so a report can bootstrap a group mean or compare two arms item by
item. An evaluation stage writes its item sets to ``items.jsonl`` in its cache
entry (one JSON line per model x language); the runner merges every stage's sets into
the run folder's ``RUN_DIR/results/items.jsonl``, each tagged with its ``stage``
(:func:`merge_run_items`), and :func:`run_items` reads them from there, so a report needs
the run folder alone.

Kinds and their columns (``ids`` aligns items across arms); how a metric is recomputed
from a kind's columns is part of the metric's registration (``items=`` of
:func:`polymnesia.metrics.base.register_metric`), so a new metric needs no edit here:

* ``lm``: ``nll`` (summed nats), ``tokens``, ``bytes``, ``words`` per text ->
  ``bits_per_byte``, ``perplexity``, ``word_perplexity``, ``lm_loss`` (or, for the
  masked-LM loss, where ``tokens`` counts masked positions: ``mlm_loss``);
* ``label``: ``pred``, ``gold`` (and ``n_labels``) per example -> ``accuracy``, ``macro_f1``;
* ``token``: ``correct``, ``total``, ``tp``, ``n_pred``, ``n_gold`` per tagged
  sentence -> token ``accuracy``, ``span_f1``;
* ``values``: ``values`` per item -> their mean (any metric name);
* ``stats``: ``stats`` (a list of sufficient statistics per item) -> corpus chrF or
  BLEU from summed n-gram counts;
* ``docs``: a column per metric, one value per document (lm-evaluation-harness's per-document
  ``acc``, ``acc_norm``, ``exact_match``...) -> the mean of that metric's column; a metric
  without a column is refused.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.errors import DataError, PolymnesiaError
from polymnesia.io import read_jsonl_strict, write_jsonl_atomic
from polymnesia.metrics.base import item_kinds, item_rule
from polymnesia.metrics.hierarchical import hierarchical_bootstrap_ci
from polymnesia.metrics.seed_items import Shared
from polymnesia.metrics.uncertainty import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    Interval,
    ItemStatistic,
    bootstrap_ci,
    mean_statistic,
    stratified_bootstrap_ci,
)
from polymnesia.results import Score, with_interval

ITEMS_FILE = "items.jsonl"
#: the run folder's merged item sets, relative to the run folder
RUN_ITEMS = Path("results") / ITEMS_FILE
KINDS = ("lm", "label", "token", "values", "stats", "docs")
_IDENTITY = ("model", "lang", "task", "group", "size", "seed", "step", "setting")


@dataclass(frozen=True)
class ItemSet:
    """The items one model was scored on in one language: identity fields as in ``Score``, then
    columns.
    """

    model: str
    lang: str
    kind: str
    ids: list[Any]
    columns: Mapping[str, list[float] | list[list[float]]]
    task: str = "lm"
    group: str | None = None
    size: str | None = None
    seed: int | None = None
    step: int | None = None
    setting: str | None = None
    n_labels: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: the stage that wrote these items (set when a run folder merges its stages' items)
    stage: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise DataError(f"item kind '{self.kind}' is unknown; accepted: {', '.join(KINDS)}")
        lengths = {k: len(v) for k, v in self.columns.items()}
        if any(n != len(self.ids) for n in lengths.values()):
            raise DataError(
                f"items of {self.model}/{self.lang}: {len(self.ids)} ids but columns of lengths "
                f"{lengths}"
            )

    @property
    def n(self) -> int:
        return len(self.ids)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and v != {}}

    def statistic(self, metric: str) -> ItemStatistic:
        """The :class:`ItemStatistic` that reproduces ``metric`` on these items: the mean of
        its column (kinds ``docs`` and ``values``), else the rule the metric's registration
        gives for this kind (:func:`polymnesia.metrics.base.register_metric`)."""
        c = {k: np.asarray(v, dtype=float) for k, v in self.columns.items()}
        if self.kind == "docs":  # a column per metric, one value per document: their mean
            if metric not in c:
                raise PolymnesiaError(
                    f"metric '{metric}' is not among these documents' columns; accepted: "
                    f"{', '.join(sorted(c)) or 'none'}"
                )
            return mean_statistic(c[metric], metric)
        if self.kind == "values":
            return mean_statistic(c["values"], metric)
        rule = item_rule(metric, self.kind)
        if rule is None:
            raise PolymnesiaError(
                f"metric '{metric}' cannot be computed from '{self.kind}' items; accepted: "
                f"{', '.join(item_kinds(self.kind)) or 'none'}"
            )
        return rule(c, self.n_labels)


def item_set_from_dict(record: Mapping[str, Any], where: str = "item record") -> ItemSet:
    try:
        return ItemSet(**record)
    except TypeError as e:
        raise DataError(f"{where}: {e}") from None


def write_items(path: str | os.PathLike[str], sets: Iterable[ItemSet]) -> None:
    """Write item sets as JSON lines (one per model x language), atomically."""
    write_jsonl_atomic(path, [s.to_dict() for s in sets])


def read_items(path: str | os.PathLike[str]) -> list[ItemSet]:
    """Read an ``items.jsonl`` (strictly: a bad line is damage); a missing file gives an empty
    list."""
    records = read_jsonl_strict(path, missing_ok=True)
    return [item_set_from_dict(r, f"{path} line {i + 1}") for i, r in enumerate(records)]


def merge_run_items(run_dir: str | os.PathLike[str], stage_entries: Mapping[str, Path]) -> None:
    """Write ``RUN_DIR/results/items.jsonl``: the item sets of every stage's complete entry
    (``{stage name: entry folder}``, in pipeline order), each tagged with its stage."""
    lines: list[dict[str, Any]] = []
    advice = "run the experiment again: the damaged entry is rebuilt"
    for name, entry in stage_entries.items():
        for rec in read_jsonl_strict(Path(entry) / ITEMS_FILE, missing_ok=True, advice=advice):
            lines.append({**rec, "stage": name})
    write_jsonl_atomic(Path(run_dir) / RUN_ITEMS, lines)


def run_items(run_dir: str | os.PathLike[str], *, stage: str | None = None) -> list[ItemSet]:
    """Every item set of a run (``RUN_DIR/results/items.jsonl``), or those of one ``stage``.

    A run folder written before the runner merged items has none: the report then shows
    the intervals stored in the score records and no paired tests (``polymnesia run`` on
    the same config reuses every stage and writes the merged items).
    """
    sets = read_items(Path(run_dir) / RUN_ITEMS)
    return sets if stage is None else [s for s in sets if s.stage == stage]


def select_items(sets: Iterable[ItemSet], **equals: Any) -> list[ItemSet]:
    """Item sets whose identity fields equal the given values (a list/tuple/set means "one of")."""
    for key in equals:
        if key not in _IDENTITY:
            raise PolymnesiaError(f"unknown item field '{key}'; accepted: {', '.join(_IDENTITY)}")

    def keep(s: ItemSet) -> bool:
        for key, want in equals.items():
            have = getattr(s, key)
            ok = have in want if isinstance(want, (list, tuple, set, frozenset)) else have == want
            if not ok:
                return False
        return True

    return [s for s in sets if keep(s)]


def aligned(a: ItemSet, b: ItemSet) -> tuple[ItemSet, ItemSet]:
    """``a`` and ``b`` restricted to their common item ids, in one order (for paired tests).

    Raises when they share no item: two arms evaluated on different samples
    cannot be compared item by item.
    """
    if a.ids == b.ids:
        return a, b
    common = [i for i in a.ids if i in set(b.ids)]
    if not common:
        raise DataError(f"{a.model} and {b.model} share no test item in '{a.lang}'")
    return _subset(a, common), _subset(b, common)


def across_seeds(
    per_seed: Sequence[Sequence[tuple[ItemSet, ...]]],
) -> tuple[list[list[tuple[ItemSet, ...]]], Shared]:
    """Each seed's strata in the first seed's language order, and which items the seeds share
    (:data:`~polymnesia.metrics.seed_items.Shared`, for the ``shared_items`` of a pooled
    interval, :func:`~polymnesia.metrics.hierarchical.hierarchical_bootstrap_ci`).

    Items are matched by id, stratum by stratum: the ids every seed has (their
    intersection) come first, in the first seed's order, then each seed's own items in its
    order. The shared items are the crossed part of the design (one item resample read by
    every seed), the others the nested part (resampled per seed), so one differing id moves
    that item alone, not the whole stratum. Returns ``True`` where every seed has the same
    items in every stratum (a seed that lists them in another order is put in the first
    seed's order), ``False`` where no stratum has an item all seeds share, else the number
    of shared items per stratum.

    ``per_seed[k]`` holds seed ``k``'s strata, one per language (or per task of a language),
    each a tuple of item sets on the same items (two arms of a paired test, or one set).
    Seeds score the same items where the test sample does not depend on the training seed;
    where it does (documents a stage samples with the training seed, as two_phase's harness
    stages do; the words an isotropy stage finds through a seed's tokenizer) the items
    differ. Every seed must have the same strata.
    """
    if len(per_seed) < 2:
        return [list(x) for x in per_seed], True
    by_key = [{(t[0].lang, t[0].task): t for t in seed} for seed in per_seed]
    keys = [(t[0].lang, t[0].task) for t in per_seed[0]]
    if any(sorted(d) != sorted(keys) for d in by_key) or len(set(keys)) != len(keys):
        raise DataError(
            f"the seeds were scored in different languages or tasks: {[sorted(d) for d in by_key]}"
        )
    strata = [[d[key] for key in keys] for d in by_key]
    counts: list[int] = []
    crossed = True
    for k in range(len(keys)):
        if all(seed[k][0].ids == strata[0][k][0].ids for seed in strata):
            counts.append(strata[0][k][0].n)  # the same items in the same order
            continue
        have = [set(seed[k][0].ids) for seed in strata]
        common = [i for i in strata[0][k][0].ids if all(i in h for h in have[1:])]
        counts.append(len(common))
        crossed = crossed and all(len(h) == len(common) for h in have)
        in_all = set(common)
        for seed in strata:
            t = seed[k]
            order = common + [i for i in t[0].ids if i not in in_all]
            if t[0].ids != order:
                seed[k] = tuple(_subset(x, order) for x in t)
    if crossed:
        return strata, True
    return strata, (list(counts) if any(counts) else False)


def _subset(s: ItemSet, ids: Sequence[Any]) -> ItemSet:
    pos = {i: k for k, i in enumerate(s.ids)}
    cols = {name: [col[pos[i]] for i in ids] for name, col in s.columns.items()}
    return ItemSet(**{**asdict(s), "ids": list(ids), "columns": cols})


class BootstrapConfig(StrictModel):
    """How evaluation stages and reports resample test items (docs/reports.md)."""

    n_resamples: int = Field(DEFAULT_RESAMPLES, ge=1, description="bootstrap resamples")
    level: float = Field(DEFAULT_LEVEL, gt=0, lt=1, description="confidence level of intervals")
    seed: int = Field(0, description="seed of the resampling")


def interval_of(items: ItemSet, metric: str, cfg: BootstrapConfig | None = None) -> Interval:
    """Percentile bootstrap interval of ``metric`` over ``items``."""
    cfg = cfg or BootstrapConfig()
    return bootstrap_ci(
        items.statistic(metric), n_resamples=cfg.n_resamples, level=cfg.level, seed=cfg.seed
    )


def score_with_items(score: Score, items: ItemSet, cfg: BootstrapConfig | None = None) -> Score:
    """``score`` with the bootstrap interval of its metric over ``items`` (its value unchanged)."""
    return with_interval(score, interval_of(items, score.metric, cfg))


def group_intervals(
    sets: Sequence[ItemSet],
    metric: str,
    groups: Mapping[str, Sequence[str]],
    cfg: BootstrapConfig | None = None,
) -> dict[tuple[str, str | None, str], Interval]:
    """``{(model, size, group): interval}`` of each group mean, items resampled within languages.

    Mirrors :func:`polymnesia.reports.tables.group_means`: a group's estimate
    is the unweighted mean over its languages, ``"overall"`` the mean over every
    language of the model. Item sets of several training seeds (each tagged with its seed,
    every seed in the same languages) give the interval over seeds and items
    (:func:`~polymnesia.metrics.hierarchical.hierarchical_bootstrap_ci`); several untagged
    sets of one language (settings) are refused: select one with :func:`select_items`.
    """
    cfg = cfg or BootstrapConfig()
    out: dict[tuple[str, str | None, str], Interval] = {}
    keys = dict.fromkeys((s.model, s.size) for s in sets)
    for model, size in keys:
        by_seed: dict[int | None, dict[str, ItemSet]] = {}
        for s in sets:
            if s.model == model and s.size == size:
                mine = by_seed.setdefault(s.seed, {})
                if s.lang in mine or (len(by_seed) > 1 and None in by_seed):
                    raise DataError(
                        f"group_intervals got several item sets of {model} in '{s.lang}' "
                        "(settings, or seeds not tagged); select one with select_items(...)"
                    )
                mine[s.lang] = s
        seeds = list(by_seed.values())
        if len({tuple(sorted(m)) for m in seeds}) > 1:
            raise DataError(
                f"group_intervals: the seeds of {model} were scored in different languages"
            )
        shared: Shared = True  # a crossed design unless the seeds scored different items
        if len(seeds) > 1:  # the items matched by id, in the first seed's order
            strata, shared = across_seeds([[(m[lang],) for lang in seeds[0]] for m in seeds])
            seeds = [{t[0].lang: t[0] for t in seed} for seed in strata]
        order = list(seeds[0])  # the strata's languages, which per-language counts follow
        for group, langs in [*groups.items(), ("overall", order)]:
            chosen = [lang for lang in langs if lang in seeds[0]]
            if not chosen:
                continue
            per_seed = [[m[lang].statistic(metric) for lang in chosen] for m in seeds]
            # a group's languages are some of the strata: their shared counts, not all
            ours = shared if isinstance(shared, bool) else [shared[order.index(x)] for x in chosen]
            n, level, seed = cfg.n_resamples, cfg.level, cfg.seed
            out[(model, size, group)] = (
                hierarchical_bootstrap_ci(
                    per_seed, n_resamples=n, level=level, seed=seed, shared_items=ours
                )
                if len(seeds) > 1
                else stratified_bootstrap_ci(per_seed[0], n_resamples=n, level=level, seed=seed)
            )
    return out


def scores_with_intervals(
    items: ItemSet, metrics: Sequence[str], cfg: BootstrapConfig | None = None, **fields: Any
) -> list[Score]:
    """One :class:`Score` per metric, its value and bootstrap interval computed on ``items``
    (``fields``: model, lang, task, group, ... of the records)."""
    out = []
    for metric in metrics:
        iv = interval_of(items, metric, cfg)
        out.append(with_interval(Score(metric=metric, value=iv.estimate, **fields), iv))
    return out

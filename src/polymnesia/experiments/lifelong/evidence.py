"""The per-item evidence of a lifelong run: every R entry as an item statistic, resampled.

Each ``sequential_step`` stage keeps the predictions and gold labels behind
its scores in ``items.jsonl``. Here every arm's R (per order) is rebuilt as a
grid of :class:`~polymnesia.metrics.uncertainty.ItemStatistic`, in the layout
the results use (one stage per row for sequential arms, MULTI's single row
repeated, MONO / NON-SHARED LoRA composed from their per-language models),
and replicated with one draw of test items per language shared by every
entry, order and arm (:mod:`polymnesia.continual.resample`). A run whose
stages kept no items (an older run, a removed cache entry) gets no
replicates: its report prints bare numbers and its claims are inconclusive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from polymnesia.continual.matrix import independent_cells, joint_cells
from polymnesia.continual.methods import get_method
from polymnesia.continual.resample import (
    Replicates,
    draw_items,
    replicate,
    replicate_dict,
    replicate_matrix,
)
from polymnesia.errors import DataError
from polymnesia.experiments.lifelong.config import LifelongConfig
from polymnesia.experiments.lifelong.keys import arm_key
from polymnesia.experiments.lifelong.results import Arm, matrix_metrics
from polymnesia.items import ItemSet, aligned, run_items
from polymnesia.metrics.uncertainty import ItemStatistic
from polymnesia.reports.claims import Baselines, label_baselines
from polymnesia.reports.frame import RunTable


@dataclass
class Evidence:
    """What the run's items give: draws per language, the untrained model's replicates,
    baselines.
    """

    n: int  # test items over all languages
    level: float
    draws: dict[str, np.ndarray]
    untrained: dict[str, np.ndarray] = field(default_factory=dict)  # language -> [B]
    baselines: dict[str, Baselines] = field(default_factory=dict)  # label tasks only

    @property
    def n_resamples(self) -> int:
        return int(next(iter(self.draws.values())).shape[0])


class _Items:
    """Item sets by stage and language, aligned on the first set seen of each language."""

    def __init__(self, sets: list[ItemSet], metric: str) -> None:
        self.metric = metric
        self.by_stage: dict[str, list[ItemSet]] = {}
        for s in sets:
            self.by_stage.setdefault(str(s.stage), []).append(s)
        self.ref: dict[str, ItemSet] = {}
        self._stats: dict[tuple[str, str], ItemStatistic] = {}

    def stage(self, name: str) -> dict[str, ItemStatistic]:
        sets = self.by_stage.get(name, [])
        if not sets:
            raise FileNotFoundError(name)
        out = {}
        for s in sets:
            if (name, s.lang) not in self._stats:
                self._stats[(name, s.lang)] = self._aligned(s).statistic(self.metric)
            out[s.lang] = self._stats[(name, s.lang)]
        return out

    def _aligned(self, s: ItemSet) -> ItemSet:
        ref = self.ref.setdefault(s.lang, s)
        a, b = aligned(ref, s)
        if a.n != ref.n:
            raise DataError(
                f"'{s.lang}' was scored on different test items by {ref.model} and {s.model}"
            )
        return b


def _cells(
    items: _Items, cfg: LifelongConfig, arm: Arm, name: str, order: list[str]
) -> list[list[ItemStatistic]]:
    key, sched = arm_key(arm.method, arm.rank), get_method(arm.method).schedule
    if sched == "sequential":
        rows = [items.stage(f"{key}_{name}_{i}") for i in range(len(order))]
        return [[row[lang] for lang in order] for row in rows]
    if sched == "joint":
        return joint_cells(items.stage(key), order)
    return independent_cells({a: items.stage(f"{key}_{a}") for a in cfg.languages}, order)


def attach_evidence(
    cfg: LifelongConfig,
    run: RunTable | Path,
    arms: list[Arm],
    orders: Mapping[str, list[str]],
) -> Evidence | None:
    """Fill ``arm.reps`` for every arm from the run's items (its table, or its folder); None
    when some stage kept none."""
    sets = run.items() if isinstance(run, RunTable) else run_items(run)
    items = _Items(sets, cfg.task.metric)
    try:
        cells = {
            arm.label: {n: _cells(items, cfg, arm, n, o) for n, o in orders.items()} for arm in arms
        }
        untrained = items.stage("untrained")
    except FileNotFoundError:
        return None
    sizes = {lang: s.n for lang, s in items.ref.items()}
    bs = cfg.bootstrap
    draws = draw_items(sizes, bs.n_resamples, bs.seed)
    for arm in arms:
        arm.reps = {n: replicate_matrix(cells[arm.label][n], o, draws) for n, o in orders.items()}
    ev = Evidence(sum(sizes.values()), bs.level, draws)
    ev.untrained = {lang: st.replicates(draws[lang]) for lang, st in untrained.items()}
    for lang, ref in items.ref.items():
        if ref.kind == "label":
            ev.baselines[lang] = label_baselines(ref.columns["gold"], ref.n_labels)
    return ev


def metric_replicates(
    arm: Arm,
    orders: Mapping[str, list[str]],
    b: Mapping[str, float],
    ev: Evidence | None,
) -> dict[str, Replicates]:
    """Every metric of :func:`matrix_metrics` with its replicates (empty without evidence)."""

    def fn(rs: Mapping[str, np.ndarray], k: int | None) -> dict[str, float]:
        if k is None or ev is None:
            return matrix_metrics(rs, orders, b)
        bk = {lang: float(v[k]) for lang, v in ev.untrained.items()} if b else {}
        return matrix_metrics(rs, orders, bk)

    return replicate_dict(fn, arm.Rs, arm.reps if ev else None, ev.n if ev else 0, _level(ev))


def arm_quantity(
    arm: Arm, fn: Callable[[Mapping[str, np.ndarray]], float], ev: Evidence | None
) -> Replicates:
    """Any function of one arm's matrices (a group mean, a hop average) with its replicates."""
    return replicate(fn, arm.Rs, arm.reps if ev else None, ev.n if ev else 0, _level(ev))


def _level(ev: Evidence | None) -> float:
    return ev.level if ev is not None else 0.95


def mean_baselines(baselines: Mapping[str, Baselines]) -> Baselines:
    """The baselines of a mean over languages: each baseline averaged over the languages."""
    bs = list(baselines.values())
    if not bs:
        raise DataError("no labelled test items to compute baselines from")
    return Baselines(
        sum(b.n for b in bs),
        max(b.n_labels for b in bs),
        bs[0].majority_label,
        float(np.mean([b.chance_accuracy for b in bs])),
        float(np.mean([b.chance_macro_f1 for b in bs])),
        float(np.mean([b.majority_accuracy for b in bs])),
        float(np.mean([b.majority_macro_f1 for b in bs])),
    )

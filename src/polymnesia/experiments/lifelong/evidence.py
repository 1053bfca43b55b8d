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

With several training seeds (:class:`Pool`) each seed is read as a run of its own (its arms,
orders and item replicates, :func:`polymnesia.experiments.seed_records.seed_view`), and
every number is the mean over seeds (a :class:`SeedReplicates`: the per-seed values and the
item replicates of the mean). The
seeds are scored on the same test items with the same draws, so replicate ``b`` of every
seed reads the same item resample (a crossed design). Its interval and paired test are
:func:`~polymnesia.metrics.seed_items.seed_item_interval` /
:func:`~polymnesia.metrics.seed_items.paired_seed_item_test`: the variance of those item
replicates plus ``s^2 / k`` over the seeds, with a Student t quantile at Welch-Satterthwaite
degrees of freedom. A difference between two arms subtracts seed by seed and replicate by
replicate, so it stays paired over seeds and items. With one seed a :class:`Pool` gives
each seed's numbers exactly as they were.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
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
from polymnesia.continual.resample import best_of as _best_of
from polymnesia.errors import DataError
from polymnesia.experiments.lifelong.config import LifelongConfig
from polymnesia.experiments.lifelong.keys import arm_key
from polymnesia.experiments.lifelong.results import Arm, matrix_metrics
from polymnesia.items import ItemSet, aligned, run_items
from polymnesia.metrics.seed_items import paired_seed_item_test, seed_item_interval
from polymnesia.metrics.uncertainty import Interval, ItemStatistic, PairedTest
from polymnesia.reports.baselines import Baselines, label_baselines
from polymnesia.reports.frame import RunTable
from polymnesia.results import Score


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


#: a quantity of one arm of one seed: its R per order and that seed's orders -> a number
Fn = Callable[[Mapping[str, np.ndarray], Mapping[str, list[str]]], float]
#: the same, one number per language
LangFn = Callable[[Mapping[str, np.ndarray], Mapping[str, list[str]]], Mapping[str, float]]


@dataclass
class SeedRun:
    """One training seed of a run: its orders (the destructive ones depend on the seed), arms
    with their R per order and item replicates, evidence, the untrained model's scores and
    the order records."""

    seed: int
    orders: dict[str, list[str]]
    arms: list[Arm]
    ev: Evidence | None
    untrained: dict[str, float] = field(default_factory=dict)
    positions: list[Score] = field(default_factory=list)

    def arm(self, label: str) -> Arm:
        for a in self.arms:
            if a.label == label:
                return a
        raise DataError(f"seed {self.seed} has no scores of {label}; run the experiment again")


@dataclass(frozen=True)
class SeedReplicates(Replicates):
    """A mean over ``k >= 2`` training seeds: ``points`` the ``k`` per-seed values, ``values``
    the item replicates of the mean over seeds and ``per_seed`` each seed's (``[k, B]``,
    replicate ``b`` of every seed on the same item resample). The interval and paired test
    combine the seed and item variance, the seed x item interaction counted once
    (:func:`~polymnesia.metrics.seed_items.seed_item_interval`)."""

    points: np.ndarray = field(default_factory=lambda: np.array([]))
    per_seed: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))

    def _ok(self) -> bool:
        return (
            self.per_seed.shape[0] == self.points.size
            and int(np.all(np.isfinite(self.per_seed), axis=0).sum()) >= 2
            and bool(np.isfinite(self.point))
        )

    def interval(self) -> Interval:
        if not self._ok():
            return Interval(self.point, np.nan, np.nan, self.n, self.level, "no replicates")
        return seed_item_interval(
            self.points, self.per_seed, n=self.n, level=self.level, estimate=self.point
        )

    def method(self) -> str:
        return self.interval().method

    def test(self) -> PairedTest:
        if not self._ok():
            iv = self.interval()
            return PairedTest(
                iv.estimate, iv.low, iv.high, np.nan, self.n, iv.method, self.level, None
            )
        return paired_seed_item_test(
            self.points, self.per_seed, n=self.n, level=self.level, effect=self.point
        )

    def __sub__(self, other: Replicates) -> Replicates:
        if not isinstance(other, SeedReplicates) or other.points.shape != self.points.shape:
            raise DataError(
                "a difference over training seeds needs both quantities pooled over the same seeds"
            )
        per_seed = (
            self.per_seed - other.per_seed
            if self.per_seed.shape == other.per_seed.shape
            else np.zeros((0, 0))
        )
        return SeedReplicates(
            self.point - other.point,
            self.values - other.values,
            self.n,
            self.level,
            self.what,
            self.points - other.points,
            per_seed,
        )


def best_of(items: Sequence[Replicates]) -> Replicates:
    """The largest of several quantities (:func:`polymnesia.continual.resample.best_of`:
    point and item replicate by replicate); pooled over seeds, the per-seed values are those
    of the quantity with the largest pooled point, and each replicate's per-seed values
    those of the quantity largest in that replicate."""
    best = _best_of(items)
    if not items or not all(isinstance(r, SeedReplicates) for r in items):
        return best
    seeded = [r for r in items if isinstance(r, SeedReplicates)]
    top = max(seeded, key=lambda r: r.point)
    per_seed = np.zeros((0, 0))
    if best.values.size and all(r.per_seed.shape == top.per_seed.shape for r in seeded):
        stack = np.stack([r.per_seed for r in seeded])  # [q, k, B]
        means = np.stack([r.values for r in seeded])  # [q, B]
        pick = np.argmax(np.where(np.isnan(means), -np.inf, means), axis=0)
        per_seed = np.take_along_axis(stack, pick[None, None, :], axis=0)[0]
    return SeedReplicates(
        best.point, best.values, best.n, best.level, best.what, top.points, per_seed
    )


class Pool:
    """The run's quantities over its training seeds (see the module docstring).

    ``arms`` are the first seed's (labels, ranks, parameter counts); every seed must have the
    same arms. :meth:`quantity` is one quantity of one arm with its replicates: with one
    seed, :func:`arm_quantity` on that seed; with several, the mean over seeds as a
    :class:`SeedReplicates` (no replicates when a seed has no item evidence).
    """

    def __init__(self, runs: Sequence[SeedRun]) -> None:
        # the seeds' evidence already holds the item draws, so pooling makes none of its own
        if not runs:
            raise DataError("need at least one seed")
        labels = [a.label for a in runs[0].arms]
        for r in runs[1:]:
            if [a.label for a in r.arms] != labels:
                raise DataError(
                    f"seed {r.seed} has arms {[a.label for a in r.arms]}, seed {runs[0].seed} "
                    f"has {labels}; run the experiment again to build every seed's arms"
                )
        self.runs = list(runs)
        self.seeds = [r.seed for r in runs]
        self.arms = runs[0].arms
        self.orders = runs[0].orders
        first = runs[0].ev
        self.evidence = first
        self.baselines: dict[str, Baselines] = first.baselines if first is not None else {}
        self.n = first.n if first is not None else 0
        self.level = _level(first)
        # every seed's item replicates come from the same n_resamples draws per language
        # (a crossed design: replicate b of every seed reads the same item resample)
        self.has_replicates = len(runs) > 1 and all(r.ev is not None for r in runs)

    @classmethod
    def single(cls, arms: list[Arm], orders: dict[str, list[str]], ev: Evidence | None) -> Pool:
        """One seed's arms, orders and evidence as a pool (its numbers as they are)."""
        return cls([SeedRun(0, orders, arms, ev)])

    @property
    def several(self) -> bool:
        return len(self.runs) > 1

    @property
    def what(self) -> str:
        return f"{len(self.runs)} training seeds and test items"

    def pooled(self, per_seed: Sequence[Replicates]) -> Replicates:
        """The mean over seeds of one quantity given per seed (one seed: that seed's)."""
        if len(per_seed) == 1:
            return per_seed[0]
        point = float(np.mean([r.point for r in per_seed]))
        first = per_seed[0]
        points = np.array([r.point for r in per_seed])
        if not self.has_replicates or any(r.values.size == 0 for r in per_seed):
            return SeedReplicates(point, np.array([]), first.n, first.level, self.what, points)
        stack = np.stack([r.values for r in per_seed])
        return SeedReplicates(
            point, stack.mean(axis=0), first.n, first.level, self.what, points, stack
        )

    def quantity(self, arm: Arm, fn: Fn) -> Replicates:
        """``fn`` of ``arm``'s matrices (and each seed's orders) with its replicates."""
        if not self.several:
            run = self.runs[0]
            return arm_quantity(arm, lambda rs: fn(rs, run.orders), run.ev)
        return self.pooled([_seed_quantity(r, r.arm(arm.label), fn) for r in self.runs])

    def matrix(self, label: str, name: str) -> tuple[np.ndarray, str]:
        """One arm's R for order ``name`` and what it is: the mean over seeds where every
        seed learned the same order ("mean over K seeds"), else the first seed's ("seed S
        (the order differs between seeds)"); one seed: its R and ""."""
        first = self.runs[0]
        R = first.arm(label).Rs[name]
        if not self.several:
            return R, ""
        if any(r.orders.get(name) != first.orders[name] for r in self.runs[1:]):
            return R, f"seed {first.seed} (the order differs between seeds)"
        mean = np.mean([r.arm(label).Rs[name] for r in self.runs], axis=0)
        return mean, f"mean over {len(self.runs)} seeds"

    def point(self, arm: Arm, fn: Fn) -> float:
        """``fn`` of ``arm``'s matrices, mean over seeds (no replicates)."""
        if not self.several:
            return fn(arm.Rs, self.orders)
        return float(np.mean([fn(r.arm(arm.label).Rs, r.orders) for r in self.runs]))

    def metrics(self) -> dict[str, dict[str, Replicates]]:
        """Every arm's :func:`metric_replicates`, pooled over seeds key by key."""
        per_seed = [
            {a.label: metric_replicates(a, r.orders, r.untrained, r.ev) for a in r.arms}
            for r in self.runs
        ]
        if not self.several:
            return per_seed[0]
        return {
            a.label: {
                k: self.pooled([m[a.label][k] for m in per_seed]) for k in per_seed[0][a.label]
            }
            for a in self.arms
        }

    def lang_values(self, arm: Arm, fn: LangFn) -> dict[str, float]:
        """``fn`` per language of ``arm`` (a hop average, a final score), mean over seeds."""
        if not self.several:
            return dict(fn(arm.Rs, self.orders))
        per_seed = [fn(r.arm(arm.label).Rs, r.orders) for r in self.runs]
        return {lang: _nanmean([p.get(lang, math.nan) for p in per_seed]) for lang in per_seed[0]}

    def lang_quantities(self, arm: Arm, fn: LangFn) -> dict[str, Replicates]:
        """``fn`` per language of ``arm`` with its replicates (one seed's; with several, the
        mean over seeds of each language's, as :meth:`quantity`)."""
        per_seed = [_seed_lang_quantities(r, r.arm(arm.label), fn) for r in self.runs]
        if not self.several:
            return per_seed[0]
        return {lang: self.pooled([p[lang] for p in per_seed]) for lang in per_seed[0]}


def _seed_lang_quantities(run: SeedRun, arm: Arm, fn: LangFn) -> dict[str, Replicates]:
    orders, ev = run.orders, run.ev
    return replicate_dict(
        lambda rs, _k: fn(rs, orders),
        arm.Rs,
        arm.reps if ev else None,
        ev.n if ev else 0,
        _level(ev),
    )


def _seed_quantity(run: SeedRun, arm: Arm, fn: Fn) -> Replicates:
    orders = run.orders
    return arm_quantity(arm, lambda rs: fn(rs, orders), run.ev)


def _nanmean(values: Sequence[float]) -> float:
    arr = np.asarray(values, dtype=float)
    return float(np.nanmean(arr)) if np.any(~np.isnan(arr)) else math.nan


def as_pool(arms: list[Arm], orders: dict[str, list[str]], ev: Evidence | Pool | None) -> Pool:
    """``ev`` when it is a pool, else one seed's arms, orders and evidence as one."""
    return ev if isinstance(ev, Pool) else Pool.single(arms, orders, ev)

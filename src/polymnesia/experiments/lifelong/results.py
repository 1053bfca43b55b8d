"""From the lifelong run's score records to accuracy matrices and metrics (Khelli et al. 2025)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from polymnesia.continual.matrix import (
    compose_independent,
    compose_joint,
    save_matrix,
    sequential_matrix,
)
from polymnesia.continual.methods import arm_label, get_method, table1_params
from polymnesia.experiments.lifelong.config import LifelongConfig
from polymnesia.metrics import continual as cm
from polymnesia.reports.frame import RunTable
from polymnesia.results import Score, filter_scores


@dataclass
class Arm:
    """One method at one rank: its R per order (learning order) and its parameter counts."""

    label: str
    method: str
    rank: int | None
    per_model: int
    params: int  # as Table 1 counts them
    Rs: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    #: bootstrap replicates of each R, ``[B, T, T]`` per order (None: no per-item evidence)
    reps: dict[str, np.ndarray] | None = None


def read_orders(scores: list[Score]) -> dict[str, list[str]]:
    """``{order name: languages}`` from the order stages' ``order_position`` records."""
    out: dict[str, list[tuple[float, str]]] = {}
    for s in filter_scores(scores, metric="order_position"):
        out.setdefault(str(s.setting), []).append((s.value, s.lang))
    return {name: [lang for _, lang in sorted(v)] for name, v in out.items()}


def _seconds(scores: list[Score]) -> dict[str, float]:
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}
    for s in scores:
        seen[(s.setting, s.step, tuple(s.extra.get("trained", [])))] = s.extra
    return {
        k: float(sum(e.get(k, 0.0) for e in seen.values()))
        for k in ("train_seconds", "eval_seconds", "train_examples_seen", "eval_examples")
    }


def collect_arms(cfg: LifelongConfig, run: RunTable, orders: dict[str, list[str]]) -> list[Arm]:
    """Every arm with its R per order, from the run's score records: a sequential arm's row
    ``k`` is the scores of its step ``k`` (the values its steps' ``matrix.json`` holds); joint
    and independent arms compose R from their scores (eqs. 1-3, 6)."""
    metric = cfg.task.metric
    arms = []
    T = len(cfg.languages)
    for method, rank in cfg.arms():
        label = arm_label(method, rank)
        mine = run.scores(model=label, metric=metric)
        if not mine:
            continue
        per_model = int(mine[0].params or 0)
        arm = Arm(
            label,
            method,
            rank,
            per_model,
            table1_params(method, per_model, T),
            seconds=_seconds(mine),
        )
        sched = get_method(method).schedule
        for name, order in orders.items():
            if sched == "sequential":
                arm.Rs[name] = sequential_matrix(filter_scores(mine, setting=name), order)
            elif sched == "joint":
                arm.Rs[name] = compose_joint({s.lang: s.value for s in mine}, order)
            else:
                cross: dict[str, dict[str, float]] = {}
                for s in mine:
                    cross.setdefault(s.extra["trained"][0], {})[s.lang] = s.value
                arm.Rs[name] = compose_independent(cross, order)
        arms.append(arm)
    return arms


def untrained_scores(run: RunTable, metric: str) -> dict[str, float]:
    return {s.lang: s.value for s in run.scores(model="untrained", metric=metric)}


def save_matrices(
    arms: list[Arm], orders: dict[str, list[str]], folder: Path, suffix: str = ""
) -> list[Path]:
    """Each arm's R per order as ``R_ARM_ORDER{suffix}`` (.csv and .npy; a later training
    seed's end in ``_seedS``)."""
    out = []
    for arm in arms:
        stem = arm.label.replace(" ", "_").replace("=", "").replace("-", "")
        for name, R in arm.Rs.items():
            out += list(save_matrix(R, orders[name], folder / f"R_{stem}_{name}{suffix}"))
    return out


def _mean(values: list[float]) -> float:
    arr = np.asarray(values, dtype=float)
    return float(np.nanmean(arr)) if np.any(~np.isnan(arr)) else math.nan


#: the scalar metrics of one arm, in table order (key, label)
METRICS: list[tuple[str, str]] = [
    ("final", "final avg"),
    ("cbt", "CBT"),
    ("cbt_paper_row", "CBT (row T-1)"),
    ("cft", "CFT"),
    ("bwt_gem", "BWT (GEM)"),
    ("forgetting_after_learning", "forgetting after learning"),
    ("forgetting_best_since_learned", "forgetting best since learned"),
    ("forgetting_best_before_final", "forgetting best before final"),
    ("forgetting_mammoth", "forgetting (mammoth)"),
    ("fwt_vs_untrained", "FWT (vs untrained)"),
    ("mean_average_learned", "mean P_t"),
]


def matrix_metrics(
    Rs: Mapping[str, np.ndarray], orders: Mapping[str, list[str]], b: Mapping[str, float]
) -> dict[str, float]:
    """Every scalar metric of Khelli et al. 2025 and the named variants (:data:`METRICS`), mean over
    orders.
    """
    rows: dict[str, list[float]] = {}
    for name, R in Rs.items():
        order = orders[name]
        vals = {
            "final": float(R[-1].mean()),
            "cbt": cm.cbt(R),
            "cbt_paper_row": cm.cbt(R, row="paper"),
            "cft": cm.cft(R),
            "bwt_gem": cm.bwt_gem(R),
            "forgetting_after_learning": cm.forgetting_after_learning(R),
            "forgetting_best_since_learned": cm.forgetting_best_since_learned(R),
            "forgetting_best_before_final": cm.forgetting_best_before_final(R),
            "forgetting_mammoth": cm.forgetting_mammoth(R),
            "fwt_vs_untrained": cm.fwt_vs_untrained(R, [b[lang] for lang in order])
            if b
            else math.nan,
            "mean_average_learned": float(cm.average_learned(R).mean()),
        }
        for k, v in vals.items():
            rows.setdefault(k, []).append(v)
    return {k: _mean(v) for k, v in rows.items()}


def arm_metrics(arm: Arm, orders: dict[str, list[str]], b: dict[str, float]) -> dict[str, float]:
    """:func:`matrix_metrics` of one arm's matrices."""
    return matrix_metrics(arm.Rs, orders, b)


def final_scores(Rs: Mapping[str, np.ndarray], orders: Mapping[str, list[str]]) -> dict[str, float]:
    """Score of each language after the last step, averaged over the orders."""
    acc: dict[str, list[float]] = {}
    for name, R in Rs.items():
        for j, lang in enumerate(orders[name]):
            acc.setdefault(lang, []).append(float(R[-1, j]))
    return {lang: _mean(v) for lang, v in acc.items()}


def final_by_language(arm: Arm, orders: dict[str, list[str]]) -> dict[str, float]:
    """Score of each language after the last step, averaged over the orders."""
    return final_scores(arm.Rs, orders)


def learned_score(Rs: Mapping[str, np.ndarray]) -> float:
    """Mean score of each language right after it was learned (the diagonal of R), over orders."""
    return _mean([float(np.diag(R).mean()) for R in Rs.values()])


def average_curve(arm: Arm) -> np.ndarray:
    """Figure 2: the average over learned languages after each step, averaged over the orders."""
    return np.mean([cm.average_learned(R) for R in arm.Rs.values()], axis=0)


def per_language(
    arm: Arm, orders: dict[str, list[str]], hops: int, shift: cm.Shift = "literal"
) -> dict[str, Any]:
    """P_avg (eq. 9, reading ``shift``) and MFT_h / MBT_h (eqs. 13-14) per language, over the
    orders.
    """
    names = list(arm.Rs)
    ords, Rs = [orders[n] for n in names], [arm.Rs[n] for n in names]
    return {
        "shift": cm.performance_shift(ords, Rs, shift=shift),
        "mft": cm.multi_hop_by_language(ords, Rs, hops, "mft"),
        "mbt": cm.multi_hop_by_language(ords, Rs, hops, "mbt"),
    }


def multi_hop(
    Rs: Mapping[str, np.ndarray], orders: Mapping[str, list[str]], hops: int, kind: cm.Kind
) -> dict[str, np.ndarray]:
    """MFT_h or MBT_h per language over the orders of ``Rs`` (eqs. 13-14)."""
    names = list(Rs)
    return cm.multi_hop_by_language([orders[n] for n in names], [Rs[n] for n in names], hops, kind)

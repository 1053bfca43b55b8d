"""Paired differences between runs: the same arm, scored on the same test items in two runs.

``polymnesia compare`` puts the runs' tables side by side, each cell with its own
interval; two intervals that overlap do not say that two runs differ or not.
When the runs scored an arm on the same test items (the same prepared data and
sample), the difference is tested item by item instead, as the reports test two
arms of one run (:func:`polymnesia.reports.evidence.arm_difference`): with two or
more seeds in common a paired test over seeds, else a paired bootstrap over the
items of every language both runs scored, stratified by language.

A score is paired across runs by its identity without the language and seed
(model, task, group, size, setting, metric); scores with a step count only at
their run's last step (a lifelong sequence's final model). Only scores whose
runs kept per-item evidence (an interval over items) are paired.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from polymnesia.errors import PolymnesiaError
from polymnesia.items import ItemSet, run_items, select_items
from polymnesia.metrics.uncertainty import PairedTest
from polymnesia.reports.evidence import arm_difference
from polymnesia.reports.table_core import Table
from polymnesia.results import Score, read_scores

#: identity fields a score is paired on across runs (the language and seed are not)
KEY = ("model", "task", "group", "size", "setting", "metric")
_REF, _OTHER = "\x00reference", "\x00other"


def _key(s: Score) -> tuple[Any, ...]:
    return tuple(getattr(s, f) for f in KEY)


def _final(scores: Sequence[Score]) -> list[Score]:
    """Scores with an interval, those with a step only at the last step of their key."""
    last: dict[tuple[Any, ...], int] = {}
    for s in scores:
        if s.step is not None:
            last[_key(s)] = max(last.get(_key(s), s.step), s.step)
    return [
        s
        for s in scores
        if s.ci_low is not None and (s.step is None or s.step == last.get(_key(s)))
    ]


@dataclass
class _Run:
    """A run's pairable scores (:func:`_final`) and items, and the keys of its scores that
    carry no interval, hence no per-item evidence to pair (similarity, drift, summaries)."""

    scores: list[Score]
    items: list[ItemSet]
    bare: set[tuple[Any, ...]]


def _load(run_dir: Path) -> _Run | None:
    path = run_dir / "results" / "scores.jsonl"
    if not path.is_file():
        return None
    every = read_scores(path)
    bare = {_key(s) for s in every if s.ci_low is None and "seconds" not in s.metric}
    return _Run(_final(every), run_items(run_dir), bare)


def pair_runs(
    ref: tuple[list[Score], list[ItemSet]],
    other: tuple[list[Score], list[ItemSet]],
    untested: list[str] | None = None,
) -> list[tuple[tuple[Any, ...], PairedTest]]:
    """``(key, test of other - ref)`` for every key both runs scored on common items (each
    side: its scores with an interval and its items); a key whose items cannot be tested adds
    a line to ``untested`` (when given)."""
    (ref_scores, ref_items), (scores, items) = ref, other
    by_key: dict[tuple[Any, ...], tuple[list[Score], list[Score]]] = {}
    for side, chosen in ((0, ref_scores), (1, scores)):
        for s in chosen:
            by_key.setdefault(_key(s), ([], []))[side].append(s)
    out = []
    for key, (a, b) in sorted(by_key.items(), key=lambda kv: tuple(map(str, kv[0]))):
        langs = sorted({s.lang for s in a} & {s.lang for s in b})
        if not a or not b or not langs:
            continue
        try:
            test = _pair(key, a, b, ref_items, items, langs)
        except PolymnesiaError as e:
            if untested is not None:
                untested.append(f"{'/'.join(str(k) for k in key if k is not None)}: {e}")
            continue
        if test is not None:
            out.append((key, test))
    return out


def _pair(
    key: tuple[Any, ...],
    a: list[Score],
    b: list[Score],
    ref_items: list[ItemSet],
    items: list[ItemSet],
    langs: list[str],
) -> PairedTest | None:
    ident = dict(zip(KEY, key, strict=True))
    metric = ident.pop("metric")
    seeds = sorted({s.seed for s in a} & {s.seed for s in b}, key=lambda x: (x is None, x))
    if not seeds:
        return None
    where: dict[str, Any] = {k: v for k, v in ident.items() if k != "model"}
    where["lang"] = langs
    if len(seeds) < 2:  # one seed in common: its items
        where["seed"] = seeds[0]

    def relabel(chosen: Sequence[Any], label: str) -> list[Any]:
        return [replace(s, model=label) for s in chosen]

    def matching(sets: list[ItemSet], side: list[Score]) -> list[ItemSet]:
        """The item sets behind ``side``'s scores (the same identity and step)."""
        steps = {s.step for s in side}
        return [s for s in select_items(sets, **ident, lang=langs) if s.step in steps]

    ref_sets, other_sets = matching(ref_items, a), matching(items, b)
    for run, sets in (("the first run", ref_sets), ("the later run", other_sets)):
        _refuse_ambiguous(run, sets, where.get("seed"))
    comb_scores = relabel(a, _REF) + relabel(b, _OTHER)
    comb_items = relabel(ref_sets, _REF) + relabel(other_sets, _OTHER)
    test = arm_difference(comb_scores, comb_items, metric, _OTHER, _REF, **where)
    return None if math.isnan(test.effect) or math.isnan(test.low) else test


def _refuse_ambiguous(run: str, sets: list[ItemSet], seed: Any) -> None:
    """One line when a run holds several item sets of the arm for one language and seed
    (several stages scored it: F_p after each task's fine-tuning), so pairing is ambiguous."""
    counts = Counter((s.lang, s.seed) for s in sets if seed is None or s.seed == seed)
    twice = sorted(str(lang) for (lang, _), n in counts.items() if n > 1)
    if twice:
        raise PolymnesiaError(
            f"{run} scored this arm more than once in {', '.join(twice)} (several stages "
            "gave it items), so which items to pair is ambiguous"
        )


def _p(t: PairedTest) -> str:
    """p as the claims print it: "< 0.001" below 0.001 (a resampling p of 0 means "below one
    resample in n_resamples", never p = 0)."""
    if t.p_value == 0 and t.n_resamples and 1 / t.n_resamples > 0.001:
        return f"< {1 / t.n_resamples:g}"
    if t.p_value < 0.001:
        return "< 0.001"
    return f"{t.p_value:.3g}"


@dataclass
class RunDifferences:
    """What :func:`differences_table` found: the table of differing scores (None when none
    differs), how many paired scores are identical in both runs, and one line per paired
    score whose items could not be tested."""

    table: Table | None
    identical: int
    untested: list[str]
    without_evidence: int = 0  # scores both runs hold with no interval (nothing to pair)
    with_evidence: int = 0  # scores both runs hold with an interval (pairable in principle)


def differences_table(run_dirs: Sequence[Path], labels: Sequence[str]) -> RunDifferences:
    """One row per paired score and later run that differs: its difference from the first
    run, with the interval and p-value of the paired test. Scores identical in both runs
    (the same model on the same items, such as an arm whose stages both runs reused) are
    counted, not listed."""
    ref = _load(run_dirs[0])
    untested: list[str] = []
    if ref is None:
        return RunDifferences(None, 0, untested)
    rows: list[list[object]] = []
    identical = 0
    others = [_load(d) for d in run_dirs[1:]]
    without = len(set().union(*(ref.bare & o.bare for o in others if o is not None)))
    ref_keys = {_key(s) for s in ref.scores}
    common = set().union(*(ref_keys & {_key(s) for s in o.scores} for o in others if o is not None))
    for other, label in zip(others, labels[1:], strict=True):
        if other is None:
            continue
        pairs = pair_runs((ref.scores, ref.items), (other.scores, other.items), untested)
        for key, t in pairs:
            if t.effect == 0 and t.low == 0 and t.high == 0:
                identical += 1
                continue
            ident = dict(zip(KEY, key, strict=True))
            rows.append(
                [
                    ident["model"],
                    ident["task"],
                    ident["group"] or "",
                    ident["setting"] or "",
                    ident["metric"],
                    f"{label} − {labels[0]}",
                    f"{t.effect:+.4g} [{t.low:+.4g}, {t.high:+.4g}]",
                    _p(t),
                    t.n,
                    t.method,
                ]
            )
    if not rows:
        return RunDifferences(None, identical, untested, without, len(common))
    table = Table(
        name="paired_differences",
        title="Paired differences from the first run",
        columns=[
            "Model",
            "Task",
            "Group",
            "Setting",
            "Metric",
            "Runs",
            "Difference [CI]",
            "p",
            "n",
            "Test",
        ],
        rows=rows,
        caption=(
            "The same arm scored on the same test items in two runs: the difference of the later "
            "run from the first, tested item by item (paired bootstrap over the items of every "
            "language both runs scored, stratified by language, mean over languages) or over "
            "seeds when the runs share two or more; n counts the items or seeds. Scores with a "
            "step are compared at their run's last step."
        ),
        floatfmt=".3g",
    )
    return RunDifferences(table, identical, untested, without, len(common))

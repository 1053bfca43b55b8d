"""A run's results as one typed, indexed table, and as a pandas DataFrame for a researcher's
own analysis.

>>> from polymnesia.reports import load_run
>>> run = load_run("runs/two_phase-1a2b3c4d")                       # doctest: +SKIP
>>> run.scores(metric="acc", model=["base", "P1 english"])          # doctest: +SKIP
>>> run.items(stage="eval_pretrain")                                # doctest: +SKIP

:class:`RunTable` reads a run folder once (``run.json``, ``results/scores.jsonl``,
``results/items.jsonl``, ``results/stages.jsonl``: the records every report is made from,
never a stage folder) and answers selections of its :class:`~polymnesia.results.Score`
records from an index on ``metric`` and ``model``. Its :meth:`RunTable.frame` and
:func:`load_runs` give the same records as a DataFrame:

>>> from polymnesia.reports import load_runs
>>> df = load_runs("runs/two_phase-1a2b3c4d", "runs/two_phase-5e6f7a8b")  # doctest: +SKIP
>>> df[df.metric == "acc"].groupby(["run", "model"]).value.mean()    # doctest: +SKIP

One row per score record of each run folder's ``results/scores.jsonl`` (what the tables
and claims are made from): the run (its folder name), its experiment and config name, the
score's fields (``model``, ``lang``, ``metric``, ``value``, ``task``, ``group``, ``size``,
``params``, ``seed``, ``step``, ``setting``), its interval (``ci_low``, ``ci_high``, ``n``,
``stderr``: empty where the score has none), the stage that wrote it, and each key of its ``extra``
mapping as a
column ``extra.KEY``. The file is read strictly (:func:`polymnesia.results.read_scores`); a
folder that is not a run gives one line.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polymnesia.errors import DataError
from polymnesia.io import read_json_object
from polymnesia.items import ItemSet, run_items, select_items
from polymnesia.results import (
    STAGES_FILE,
    Score,
    StageRecord,
    filter_scores,
    read_scores,
    read_stage_records,
)

#: the columns every frame has, in this order (``extra.*`` columns follow)
COLUMNS = (
    "run",
    "experiment",
    "name",
    "model",
    "lang",
    "metric",
    "value",
    "task",
    "group",
    "size",
    "params",
    "seed",
    "step",
    "setting",
    "ci_low",
    "ci_high",
    "n",
    "stderr",
    "stage",
)


def _run_record(run_dir: Path) -> dict[str, Any]:
    record = read_json_object(run_dir / "run.json")
    if record is None:
        raise DataError(f"{run_dir} is not a polymnesia run folder (no readable run.json)")
    return record


class RunTable:
    """One run folder's records, read once and indexed (see the module docstring)."""

    def __init__(self, run_dir: str | os.PathLike[str]) -> None:
        self.run_dir = Path(run_dir)
        self.record = _run_record(self.run_dir)
        self._scores: tuple[Score, ...] = tuple(
            read_scores(self.run_dir / "results" / "scores.jsonl")
        )
        self._by: dict[tuple[str, Any], list[Score]] = {}
        for s in self._scores:
            self._by.setdefault(("metric", s.metric), []).append(s)
            self._by.setdefault(("model", s.model), []).append(s)
        self._items: list[ItemSet] | None = None
        self._stages: dict[str, StageRecord] | None = None

    @property
    def name(self) -> str:
        return self.run_dir.name

    @property
    def experiment(self) -> str | None:
        return self.record.get("experiment")

    def scores(self, **equals: Any) -> list[Score]:
        """The score records whose fields equal ``equals`` (a list/tuple/set value means "one
        of"), in file order; ``metric`` and ``model`` are answered from the index."""
        pool: Sequence[Score] = self._scores
        for key in ("metric", "model"):
            want = equals.get(key)
            if want is None:
                continue
            wanted = want if isinstance(want, (list, tuple, set, frozenset)) else [want]
            hits = {id(s) for w in wanted for s in self._by.get((key, w), [])}
            pool = [s for s in pool if id(s) in hits]
        rest = {k: v for k, v in equals.items() if k not in ("metric", "model")}
        return filter_scores(pool, **rest) if rest else list(pool)

    def items(self, *, stage: str | None = None, **equals: Any) -> list[ItemSet]:
        """The run's item sets (read on first use), of one ``stage`` and with identity fields
        ``equals`` (:func:`polymnesia.items.select_items`)."""
        if self._items is None:
            self._items = run_items(self.run_dir)
        sets = self._items if stage is None else [s for s in self._items if s.stage == stage]
        return select_items(sets, **equals) if equals else list(sets)

    def stages(self) -> dict[str, StageRecord]:
        """``{stage: record}``: each stage's build seconds and report files."""
        if self._stages is None:
            self._stages = read_stage_records(self.run_dir / "results" / STAGES_FILE)
        return self._stages

    def with_records(
        self, scores: Sequence[Score], items: Sequence[ItemSet] | None = None
    ) -> RunTable:
        """The same run with its scores (and, given, its item sets) replaced by these: a
        re-tagged view (seeds, say) indexed like the run read from its folder."""
        table = copy.copy(self)
        table._scores = tuple(scores)
        table._by = {}
        for s in table._scores:
            table._by.setdefault(("metric", s.metric), []).append(s)
            table._by.setdefault(("model", s.model), []).append(s)
        table._items = list(items) if items is not None else self._items
        return table

    def rows(self) -> list[dict[str, Any]]:
        """One plain dict per score (the DataFrame's rows; no pandas needed)."""
        return _rows(self.run_dir.name, self.record, self._scores)

    def frame(self, metrics: Sequence[str] | None = None) -> Any:
        """The scores as a ``pandas.DataFrame`` (as :func:`load_runs` gives them)."""
        return _frame(self.rows(), metrics)


def load_run(run_dir: str | os.PathLike[str]) -> RunTable:
    """One run folder's records as a :class:`RunTable` (read once; a folder that is not a run
    is refused in one line)."""
    return RunTable(run_dir)


def run_rows(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows :func:`load_runs` makes of one run folder (plain dicts, no pandas needed)."""
    return load_run(run_dir).rows()


def _rows(run: str, record: dict[str, Any], scores: Sequence[Score]) -> list[dict[str, Any]]:
    rows = []
    for s in scores:
        row: dict[str, Any] = {
            "run": run,
            "experiment": record.get("experiment"),
            "name": record.get("name"),
        }
        row.update({k: getattr(s, k) for k in COLUMNS[3:]})
        row.update({f"extra.{k}": v for k, v in sorted(s.extra.items())})
        rows.append(row)
    return rows


def load_runs(*run_dirs: str | os.PathLike[str], metrics: Sequence[str] | None = None) -> Any:
    """Every score of the run folders as one ``pandas.DataFrame`` (columns: :data:`COLUMNS`,
    then ``extra.*``); ``metrics`` keeps those metrics only. Two folders with the same name
    are refused (the ``run`` column would not tell them apart)."""
    if not run_dirs:
        raise DataError("load_runs needs at least one run folder")
    names = [Path(d).name for d in run_dirs]
    if len(set(names)) < len(names):
        raise DataError(f"run folders with the same name cannot be told apart: {names}")
    return _frame([row for d in run_dirs for row in run_rows(d)], metrics)


def _frame(rows: list[dict[str, Any]], metrics: Sequence[str] | None) -> Any:
    import pandas as pd

    if metrics is not None:
        rows = [r for r in rows if r["metric"] in set(metrics)]
    extra = sorted({k for r in rows for k in r if k.startswith("extra.")})
    return pd.DataFrame(rows, columns=[*COLUMNS, *extra])

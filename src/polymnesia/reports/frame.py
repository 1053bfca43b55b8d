"""A run's results as a pandas DataFrame, for a researcher's own analysis.

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

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polymnesia.errors import DataError
from polymnesia.results import Score, read_scores

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
    try:
        record = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        record = None
    if not isinstance(record, dict):
        raise DataError(f"{run_dir} is not a polymnesia run folder (no readable run.json)")
    return record


def run_rows(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows :func:`load_runs` makes of one run folder (plain dicts, no pandas needed)."""
    folder = Path(run_dir)
    record = _run_record(folder)
    scores: list[Score] = read_scores(folder / "results" / "scores.jsonl")
    rows = []
    for s in scores:
        row: dict[str, Any] = {
            "run": folder.name,
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
    import pandas as pd

    if not run_dirs:
        raise DataError("load_runs needs at least one run folder")
    names = [Path(d).name for d in run_dirs]
    if len(set(names)) < len(names):
        raise DataError(f"run folders with the same name cannot be told apart: {names}")
    rows = [row for d in run_dirs for row in run_rows(d)]
    if metrics is not None:
        rows = [r for r in rows if r["metric"] in set(metrics)]
    extra = sorted({k for r in rows for k in r if k.startswith("extra.")})
    return pd.DataFrame(rows, columns=[*COLUMNS, *extra])

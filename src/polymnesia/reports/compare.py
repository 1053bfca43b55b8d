"""``polymnesia compare RUN_DIR RUN_DIR...``: the headline tables of runs of one protocol side by
side.

Each run's report wrote its tables to ``RUN_DIR/results/NAME.csv`` (with
``_ci_low``/``_ci_high``/``_n`` columns where cells carry intervals). For every
table that all runs have (per-language tables left out unless asked for), the
comparison keeps the table's row labels and puts each value column of every
run next to each other ("mu_overall [laptop]", "mu_overall [gpu]"), with the
intervals shown as ``value ± half-width``. Rows present in one run only show
"–" elsewhere. Runs of different protocols are refused: their tables do not
mean the same thing.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from polymnesia.errors import DataError, PolymnesiaError
from polymnesia.io import atomic_write_text
from polymnesia.reports.render import Report
from polymnesia.reports.run_differences import differences_table
from polymnesia.reports.table_core import CI_SUFFIXES, MISSING, NA, Estimate, Table

EXCLUDED_SUFFIXES = ("_by_language",)


def run_protocol(run_dir: Path) -> str:
    """The ``experiment`` a run folder holds (from ``run.json``, else ``config.yaml``)."""
    record = run_dir / "run.json"
    if record.is_file():
        return str(json.loads(record.read_text(encoding="utf-8")).get("experiment", ""))
    config = run_dir / "config.yaml"
    if not config.is_file():
        raise PolymnesiaError(
            f"{run_dir} is not a polymnesia run folder (no run.json or config.yaml)"
        )
    import yaml

    return str((yaml.safe_load(config.read_text(encoding="utf-8")) or {}).get("experiment", ""))


def flat(data: Any, prefix: str = "") -> dict[str, Any]:
    """A nested config as ``{"a.b.c": value}`` (lists are values)."""
    if not isinstance(data, dict):
        return {prefix: data} if prefix else {}
    out: dict[str, Any] = {}
    for key, value in data.items():
        out.update(flat(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def config_differences(configs: Sequence[Any], labels: Sequence[str], limit: int = 40) -> list[str]:
    """One line per key whose value differs between the configs (each against the first):
    ``train.steps: 300 (run-a) / 600 (run-b)``; ``name`` and ``description`` are left out.
    At most ``limit`` lines, then how many more."""
    flats = [flat(c or {}) for c in configs]
    keys = sorted({k for f in flats for k in f} - {"name", "description"})
    lines = []
    for key in keys:
        values = [f.get(key, "(unset)") for f in flats]
        if any(v != values[0] for v in values[1:]):
            shown = " / ".join(f"{v} ({lab})" for v, lab in zip(values, labels, strict=True))
            lines.append(f"`{key}`: {shown}")
    if len(lines) > limit:
        lines = [*lines[:limit], f"... and {len(lines) - limit} more keys"]
    return lines


def _configs(dirs: Sequence[Path]) -> list[Any]:
    import yaml

    out = []
    for d in dirs:
        path = d / "config.yaml"
        out.append(yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else {})
    return out


def run_labels(run_dirs: Sequence[Path]) -> list[str]:
    """Folder names, or ``parent/name`` where two runs share a name."""
    names = [p.resolve().name for p in run_dirs]
    if len(set(names)) == len(names):
        return names
    return [f"{p.resolve().parent.name}/{p.resolve().name}" for p in run_dirs]


def read_table_csv(path: Path) -> tuple[list[str], list[list[Any]]]:
    """A table written by :func:`~polymnesia.reports.table_core.write_table`: columns and cells.

    Whole numbers (counts) become ints, other numbers floats, a column with CI companions
    becomes :class:`Estimate` cells.
    """
    with open(path, encoding="utf-8", newline="") as f:
        lines = list(csv.reader(f))
    if not lines:
        raise DataError(f"{path} is empty")
    header, body = lines[0], lines[1:]
    wide = {j for j, h in enumerate(header) if f"{h}_{CI_SUFFIXES[0]}" in header}
    companions = {header.index(f"{header[j]}_{s}") for j in wide for s in CI_SUFFIXES}
    columns = [h for j, h in enumerate(header) if j not in companions]
    rows = []
    for line in body:
        cells = dict(zip(header, line, strict=False))
        rows.append(
            [
                _estimate(cells, h) if j in wide else _number(cells.get(h, ""))
                for j, h in enumerate(header)
                if j not in companions
            ]
        )
    return columns, rows


def _number(text: str) -> Any:
    if text == NA:
        return math.nan
    if text.strip().lstrip("+-").isdigit():
        return int(text)  # a count (n, steps) stays a count: "498", not "498.000"
    try:
        return float(text)
    except ValueError:
        return text


def _estimate(cells: dict[str, str], column: str) -> Any:
    value = _number(cells.get(column, ""))
    if not isinstance(value, float):
        return value
    low, high = (_number(cells.get(f"{column}_{s}", "")) for s in CI_SUFFIXES[:2])
    n = cells.get(f"{column}_n", "")
    bounded = isinstance(low, float) and isinstance(high, float)
    return Estimate(
        value, low if bounded else math.nan, high if bounded else math.nan, int(n) if n else None
    )


def _key_count(rows: list[list[Any]]) -> int:
    """Leading columns that hold text in every row: the row labels (at least one)."""
    width = min((len(r) for r in rows), default=1)
    k = 0
    while k < width and all(isinstance(r[k], str) for r in rows):
        k += 1
    return max(1, k)


def side_by_side(name: str, tables: dict[str, tuple[list[str], list[list[Any]]]]) -> Table:
    """One table from the same table of several runs: row labels, then each value column per run.

    Value columns are the union over runs (a model only one run has gets "–" in the others).
    """
    first_cols, first_rows = next(iter(tables.values()))
    k = _key_count(first_rows)
    key_cols = first_cols[:k]
    keys: dict[tuple[Any, ...], None] = {}
    values: dict[str, None] = {}
    by_run: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
    for label, (cols, rows) in tables.items():
        if cols[:k] != key_cols:
            raise DataError(
                f"table '{name}' has row labels {cols[:k]} in run {label}, {key_cols} in another"
            )
        values.update(dict.fromkeys(cols[k:]))
        by_run[label] = {tuple(r[:k]): dict(zip(cols, r, strict=False)) for r in rows}
        keys.update(dict.fromkeys(by_run[label]))
    columns = key_cols + [f"{c} [{label}]" for c in values for label in tables]
    rows = [
        [*key, *(by_run[label].get(key, {}).get(c, MISSING) for c in values for label in tables)]
        for key in keys
    ]
    return Table(name=name, title=name, columns=columns, rows=rows)


def _title(results: Path, name: str) -> str:
    md = results / f"{name}.md"
    if md.is_file():
        first = md.read_text(encoding="utf-8").splitlines()[:1]
        if first and first[0].startswith("**") and first[0].endswith("**"):
            return first[0].strip("*")
    return name


def compare_runs(
    run_dirs: Sequence[str | os.PathLike[str]], tables: Sequence[str] | None = None
) -> Report:
    """The comparison report of ``run_dirs`` (two or more runs of one protocol)."""
    dirs = [Path(d) for d in run_dirs]
    if len(dirs) < 2:
        raise PolymnesiaError("compare needs at least two run folders")
    protocols = [run_protocol(d) for d in dirs]
    if len(set(protocols)) > 1:
        shown = ", ".join(f"{d} is {p or '?'}" for d, p in zip(dirs, protocols, strict=True))
        raise PolymnesiaError(
            f"cannot compare runs of different protocols ({shown}); pass runs of one protocol"
        )
    labels = run_labels(dirs)
    names = _common_tables(dirs, tables)
    rep = Report(f"Comparison of {len(dirs)} {protocols[0]} runs")
    rep.bullets([f"**{lab}**: `{d}`" for lab, d in zip(labels, dirs, strict=True)])
    diffs = config_differences(_configs(dirs), labels)
    rep.heading("How the configs differ", 2)
    if diffs:
        rep.bullets(diffs)
    else:
        rep.paragraph("The runs' resolved configs are the same but for their names.")
    rep.paragraph(
        "Each table puts the runs' columns side by side; ± is half the width of each run's "
        "interval as its report computed it (see that report's captions); – marks a row a run "
        "lacks."
    )
    for name in names:
        read = {
            lab: read_table_csv(d / "results" / f"{name}.csv")
            for lab, d in zip(labels, dirs, strict=True)
        }
        table = side_by_side(name, read)
        rep.heading(_title(dirs[0] / "results", name), 2).table(table)
    rep.heading("Paired differences from the first run", 2)
    found = differences_table(dirs, labels)
    same = (
        f"{found.identical} paired scores are identical in both runs (the same model on the "
        "same items, e.g. an arm whose stages both runs share) and are not listed."
        if found.identical
        else ""
    )
    if found.table is not None:
        rep.table(found.table)
        if same:
            rep.paragraph(same)
    elif found.identical:
        rep.paragraph(f"No score differs between the runs: {same}")
    elif not found.untested and found.with_evidence:
        rep.paragraph(
            "No score could be paired: the runs kept no per-item evidence for a common arm "
            "(its stage entries were removed, or the runs scored different test items)."
        )
    if found.without_evidence:
        rep.paragraph(
            f"{_count(found.without_evidence, 'score')} both runs hold "
            f"{'carries' if found.without_evidence == 1 else 'carry'} no per-item evidence and "
            f"{'is' if found.without_evidence == 1 else 'are'} not tested here (no interval of "
            f"{'its' if found.without_evidence == 1 else 'their'} own), such as similarity and "
            "drift measures, summaries computed from other scores, lm-evaluation-harness scores "
            "that are not a mean over documents (IFEval's instruction-level accuracy, corpus "
            "BLEU) or from harness entries cached before those kept per-document items."
        )
    if found.untested:
        rep.paragraph(
            f"{len(found.untested)} paired scores could not be tested from their items "
            f"(first: {found.untested[0]})."
        )
    return rep


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _common_tables(dirs: Sequence[Path], wanted: Sequence[str] | None) -> list[str]:
    have = [{p.stem for p in (d / "results").glob("*.csv")} for d in dirs]
    common = set.intersection(*have)
    if wanted:
        missing = [w for w in wanted if w not in common]
        if missing:
            raise PolymnesiaError(
                f"table(s) {', '.join(missing)} not in every run; common: "
                f"{', '.join(sorted(common)) or 'none'}"
            )
        return list(wanted)
    names = sorted(n for n in common if not n.endswith(EXCLUDED_SUFFIXES))
    if not names:
        raise PolymnesiaError(
            "the runs share no table in results/; run 'polymnesia report RUN_DIR' on each first"
        )
    return names


def default_out_dir(run_dirs: Sequence[str | os.PathLike[str]]) -> Path:
    """``runs/compare-HASH8``, the hash of the resolved run folders (the same runs, the same
    folder).
    """
    key = "\n".join(str(Path(d).resolve()) for d in run_dirs)
    return Path("runs") / f"compare-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


def write_comparison(
    run_dirs: Sequence[str | os.PathLike[str]],
    out_dir: str | os.PathLike[str] | None = None,
    tables: Sequence[str] | None = None,
) -> tuple[Path, Path]:
    """Write ``compare.md`` and ``compare.html`` (self-contained) into ``out_dir``; returns both."""

    rep = compare_runs(run_dirs, tables)
    out = Path(out_dir) if out_dir is not None else default_out_dir(run_dirs)
    md, page = out / "compare.md", out / "compare.html"
    atomic_write_text(md, rep.to_markdown())
    atomic_write_text(page, rep.to_html(out))
    return md, page

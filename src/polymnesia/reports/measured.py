"""Measured runs as data: the numbers a docs page quotes, recorded from run folders and checked.

A docs page's measured-run section is generated, never typed: :func:`record_runs` reads one
or more run folders of one config (one per training seed) into a JSON record (the claims of
``results/claims.csv`` or the cells of a results table, the commit, the machine, the wall time
and peak memory of each run), checked in as ``docs/runs/NAME.json``.
:mod:`polymnesia.reports.measured_block` renders the record as Markdown and puts it between
the markers ``<!-- measured-run NAME -->`` and ``<!-- /measured-run NAME -->`` of the page
(``scripts/measured_run.py`` does both). ``tests/reports/test_measured_runs.py`` fails when
a block differs from its record's rendering or quotes a number its record does not hold.

With several seeds the record holds each seed's numbers and, per claim (or table cell), the
standard deviation over seeds; the printed *seed-noise band* is twice the largest of them, a
summary: one-seed verdicts read the per-claim band records that
:func:`polymnesia.experiments.seeds.band_from_record` makes from a record
(:mod:`polymnesia.experiments.seeds`). Each claim keeps its id, kind, raw and adjusted p,
df, design and the band its verdict used (:data:`CLAIM_FIELDS`), and each run the machine
it ran on (:func:`run_machine`). A run that pools the seeds in one report (``seeds:
[..]``, every stage reused from the seeds' runs) can be recorded beside them (``pooled``):
its claims, judged over seeds and items together, are what a reader takes as the verdicts.
"""

from __future__ import annotations

import csv
import json
import os
import platform
import re
import statistics
from collections.abc import Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from polymnesia.errors import DataError

#: the record format (bump when fields change meaning)
VERSION = 1
#: verdicts of claims that were not tested (their effects measure nothing): left out of spreads
SET_ASIDE = ("not testable", "not applicable")
NUMBER = re.compile(r"(?<![\w.])[+\-−]?\d[\d,]*\.\d+")
_EFFECT = re.compile(r"([+\-−]?\d+\.\d+) \[([+\-−]?\d+\.\d+), ([+\-−]?\d+\.\d+)\]")


def _float(text: str) -> float:
    return float(text.replace("−", "-").replace(",", ""))


def parse_gnu_time(path: Path) -> tuple[float, float]:
    """``(wall seconds, peak RSS in MB)`` from a ``/usr/bin/time -v`` report."""
    text = path.read_text(encoding="utf-8")
    wall = re.search(r"Elapsed \(wall clock\) time.*?: ((?:\d+:)?\d+:\d+(?:\.\d+)?)", text)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    if not wall or not rss:
        raise DataError(f"{path} is not a /usr/bin/time -v report (no wall time or peak RSS)")
    parts = [float(p) for p in wall.group(1).split(":")]
    seconds = sum(p * 60**i for i, p in enumerate(reversed(parts)))
    return seconds, int(rss.group(1)) / 1024


#: the claims.csv columns a record keeps beside the effect (record key -> column); a column an
#: older claims.csv lacks is recorded as None
CLAIM_FIELDS = {
    "id": "id",
    "kind": "Kind",
    "p": "p",
    "p_adjusted": "p (Holm)",
    "df": "df",
    "design": "Design",
    "band": "Seed noise",
    "paper": "Paper",
    "headroom_share": "Headroom share",
}


def _p_of(text: str | None) -> float | None:
    """A shown p ("0.041", "< 0.001", "–") as a number (``< 0.001`` as 0.001, an upper bound)."""
    if text is None:
        return None
    text = text.strip().lstrip("<").strip()
    try:
        return _float(text)
    except ValueError:
        return None


def _df_of(text: str | None) -> float | None:
    """A shown df ("2.2", "∞") as a number (∞ as None: a normal or bootstrap interval)."""
    if text is None or text.strip() in ("", "∞", "–"):
        return None
    try:
        return _float(text)
    except ValueError:
        return None


def _share_of(text: str | None) -> float | None:
    """A shown share of the headroom ("+12%") as a fraction (0.12); None when not shown."""
    if not text or not text.strip().endswith("%"):
        return None
    try:
        return _float(text.strip().rstrip("%")) / 100
    except ValueError:
        return None


def read_claims(run_dir: Path) -> list[dict[str, Any]]:
    """The claims of a run folder's ``results/claims.csv``: statement, verdict, effect, interval,
    n, and (:data:`CLAIM_FIELDS`) the claim's id, kind (paper, extension, precondition), raw
    and adjusted p, the df of the interval judged, the design and the seed-noise band used.
    """
    path = run_dir / "results" / "claims.csv"
    if not path.is_file():
        return []
    out = []
    with path.open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            m = _EFFECT.search(row.get("Effect [95% CI]", ""))
            claim: dict[str, Any] = {
                "claim": row["Claim (paper)"],
                "verdict": row["Verdict"].split(" ", 1)[-1].split(":")[0],
                "effect": _float(m.group(1)) if m else None,
                "low": _float(m.group(2)) if m else None,
                "high": _float(m.group(3)) if m else None,
                "n": int(row["n"]) if row.get("n", "").isdigit() else None,
            }
            if "id" in row:  # written since claims had ids: keep what the verdict used
                for key, column in CLAIM_FIELDS.items():
                    value = row.get(column)
                    if key in ("p", "p_adjusted"):
                        claim[key] = _p_of(value)
                    elif key == "df":
                        claim[key] = _df_of(value)
                    elif key == "headroom_share":
                        claim[key] = _share_of(value)
                    else:
                        claim[key] = value or None
            out.append(claim)
    return out


def read_table(run_dir: Path, name: str) -> list[dict[str, Any]]:
    """The numeric cells of ``results/NAME.csv``: one dict per row, numbers as floats."""
    path = run_dir / "results" / f"{name}.csv"
    if not path.is_file():
        raise DataError(f"no table {path}; tables of this run: {_tables(run_dir)}")
    with path.open(encoding="utf-8") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    out = []
    for row in body:
        # the row's label: its leading text cells (a size and a model, say), joined
        n_label = next((i for i, cell in enumerate(row) if i and _numeric(cell)), len(row))
        cells: dict[str, Any] = {"row": " / ".join(c for c in row[: max(1, n_label)] if c)}
        for key, cell in zip(header[n_label:], row[n_label:], strict=False):
            try:
                cells[key] = round(_float(cell), 6)
            except ValueError:
                continue
        out.append(cells)
    return out


def _numeric(cell: str) -> bool:
    try:
        _float(cell)
    except ValueError:
        return cell == ""  # an empty cell is a missing number, not a label
    return True


def _tables(run_dir: Path) -> str:
    return ", ".join(sorted(p.stem for p in (run_dir / "results").glob("*.csv"))) or "none"


def _machine(machine: str | None) -> str:
    if machine:
        return machine
    return f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPU cores"


def _cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else what :mod:`platform` knows)."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith(("model name", "hardware", "processor\t: ")):
                name = line.split(":", 1)[1].strip()
                if name and not name.isdigit():
                    return name
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, Any]:
    """What this machine is, as a run records it: CPU model and cores, system, Python, and
    the torch, transformers and numpy versions (None when one is not installed)."""
    return {
        "cpu": _cpu_model(),
        "cpu_cores": os.cpu_count(),
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
        "python": platform.python_version(),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "numpy": _version("numpy"),
    }


def run_machine(run_dir: Path) -> dict[str, Any]:
    """The machine a run folder's last ``polymnesia run`` ran on (``run.json``'s ``machine``),
    else this machine's, marked ``"from": "recorder"`` (the record was made elsewhere than
    the run, maybe)."""
    try:
        data = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        found = data.get("machine") if isinstance(data, dict) else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        found = None
    if isinstance(found, dict):
        return {**found, "from": "run.json"}
    return {**machine_info(), "from": "recorder"}


def record_runs(
    name: str,
    config: str,
    run_dirs: Sequence[Path],
    *,
    seeds: Sequence[int | list[int]],
    commit: str,
    date: str,
    times: Sequence[tuple[float, float] | None] = (),
    machine: str | None = None,
    table: str | None = None,
    note: str = "",
    pooled: Path | None = None,
) -> dict[str, Any]:
    """The record of ``run_dirs`` (one per seed in ``seeds``) of ``config`` at ``commit``, and
    of ``pooled``, a run of the same config pooling those seeds (``seeds: [..]``). A seed given
    as a list is one run that trains those seeds inside its own pipeline (``lf_mlf``'s
    fine-tuning seeds over one pretrained base): its claims are already judged over them."""
    if len(run_dirs) != len(seeds) or not run_dirs:
        raise DataError(f"give one run folder per seed: {len(run_dirs)} folders, seeds {seeds}")
    runs = []
    for i, (run_dir, seed) in enumerate(zip(run_dirs, seeds, strict=True)):
        measured = times[i] if i < len(times) else None
        wall, rss = measured if measured is not None else (None, None)
        runs.append(
            {
                "seed": seed,
                "wall_s": None if wall is None else round(wall, 1),
                "peak_rss_mb": None if rss is None else round(rss),
                "claims": read_claims(run_dir),
                "table": read_table(run_dir, table) if table else [],
                "machine": run_machine(run_dir),
            }
        )
    record: dict[str, Any] = {
        "version": VERSION,
        "name": name,
        "config": config,
        "commit": commit,
        "date": date,
        "machine": _machine(machine),
        "table_name": table,
        "note": note,
        "runs": runs,
    }
    if pooled is not None:
        claims = read_claims(pooled)
        pooled_table = read_table(pooled, table) if table else []
        if not claims and not pooled_table:
            raise DataError(
                f"the pooled run {pooled} has no results/claims.csv"
                + (f" and no table {table}" if table else "")
            )
        record["pooled"] = {"seeds": list(seeds), "claims": claims, "table": pooled_table}
    record["spread"] = seed_spread(record)
    return record


def series_of(record: Mapping[str, Any]) -> dict[str, list[float]]:
    """Each tested claim's effect (or table cell) per seed, keyed by claim or ``row / column``."""
    out: dict[str, list[float]] = {}
    for run in record["runs"]:
        for c in run["claims"]:
            if c["effect"] is not None and c["verdict"] not in SET_ASIDE:
                out.setdefault(c["claim"], []).append(c["effect"])
        for row in run["table"]:
            for key, value in row.items():
                if key != "row" and isinstance(value, float) and not key.endswith(_NOT_MEASURES):
                    out.setdefault(f"{row['row']} / {key}", []).append(value)
    return out


#: table columns that qualify a cell (its interval, its n) rather than measure something
_NOT_MEASURES = ("_ci_low", "_ci_high", "_n")


def table_cell(row: Mapping[str, Any], key: str) -> str:
    """A table cell with its interval when the table has one (``KEY_ci_low``/``_ci_high``)."""
    value = row.get(key)
    if not isinstance(value, float):
        return "–"
    low, high = row.get(f"{key}_ci_low"), row.get(f"{key}_ci_high")
    if isinstance(low, float) and isinstance(high, float):
        return f"{value:.4f} [{low:.4f}, {high:.4f}]"
    return f"{value:.4f}"


def seed_spread(record: Mapping[str, Any]) -> dict[str, Any]:
    """Per claim (or table cell) the sample standard deviation over seeds, and the seed-noise
    band: twice the largest of the claims' (None with one seed or no claim tested in every
    seed; a table cell's spread is shown, not a band)."""
    n = len(record["runs"])
    sds = {
        k: round(statistics.stdev(v), 4)
        for k, v in series_of(record).items()
        if n >= 2 and len(v) == n
    }
    claims = {c["claim"] for r in record["runs"] for c in r["claims"]}
    of_claims = [sd for k, sd in sds.items() if k in claims]
    band = round(2 * max(of_claims), 4) if of_claims else None
    return {"n_seeds": n, "sd": sds, "band": band}


# ------------------------------------------------------------------ rendering


def write_record(path: Path, record: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def read_record(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DataError(f"{path}: not a measured-run record ({e})") from None
    if record.get("version") != VERSION:
        raise DataError(f"{path}: record version {record.get('version')}, expected {VERSION}")
    return dict(record)

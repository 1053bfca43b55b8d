"""Measured runs as data: the numbers a docs page quotes, recorded from run folders and checked.

A docs page's measured-run section is generated, never typed: :func:`record_runs` reads one
or more run folders of one config (one per training seed) into a JSON record (the claims of
``results/claims.csv`` or the cells of a results table, the commit, the machine, the wall time
and peak memory of each run), checked in as ``docs/runs/NAME.json``. :func:`render` turns the
record into Markdown, which :func:`replace_block` puts between the markers
``<!-- measured-run NAME -->`` and ``<!-- /measured-run NAME -->`` of the page
(``scripts/measured_run.py`` does both). ``tests/docs/test_measured_runs.py`` fails when a
block differs from its record's rendering or quotes a number its record does not hold
(:func:`unheld`).

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
import math
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
_NUMBER = re.compile(r"(?<![\w.])[+\-−]?\d[\d,]*\.\d+")
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


def _series(record: Mapping[str, Any]) -> dict[str, list[float]]:
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


def _cell(row: Mapping[str, Any], key: str) -> str:
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
        for k, v in _series(record).items()
        if n >= 2 and len(v) == n
    }
    claims = {c["claim"] for r in record["runs"] for c in r["claims"]}
    of_claims = [sd for k, sd in sds.items() if k in claims]
    band = round(2 * max(of_claims), 4) if of_claims else None
    return {"n_seeds": n, "sd": sds, "band": band}


# ------------------------------------------------------------------ rendering


def _num(x: float | None, fmt: str = "+.3f") -> str:
    return "–" if x is None or not math.isfinite(x) else format(x, fmt)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "not recorded"
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s} s" if m else f"{s} s"


def _seeds_of(seed: int | Sequence[int]) -> str:
    """A run's seed as a table row names it: ``3``, or ``0, 1, 2 in one run``."""
    if isinstance(seed, int):
        return str(seed)
    return f"{', '.join(str(s) for s in seed)} in one run"


def seed_label(seed: int | Sequence[int]) -> str:
    """A run's seed as the page names it: ``seed 3``, or ``seeds 0, 1, 2 in one run``."""
    return f"{'seed' if isinstance(seed, int) else 'seeds'} {_seeds_of(seed)}"


#: said beside every one-seed verdict a page quotes
ONE_MACHINE = (
    "A one-seed verdict is also a one-machine verdict: the same stages rerun on another CPU or "
    "with other library versions can move an effect by a few thousandths, enough to change a "
    "verdict near its boundary. Quote the verdict over seeds."
)


def render(record: Mapping[str, Any]) -> str:
    """The Markdown of a measured-run section (what sits between the markers)."""
    runs = record["runs"]
    if len(runs) == 1:
        seeds = seed_label(runs[0]["seed"])
    else:
        seeds = "seeds " + ", ".join(str(r["seed"]) for r in runs)
    lines = [
        f"`{record['config']}`, {seeds}; commit "
        f"{record['commit'][:7]}, {record['date']}, {record['machine']}. Generated by "
        "`scripts/measured_run.py` from the run folders (data: "
        f"`docs/runs/{record['name']}.json`).",
        "",
        "| seed | wall time | peak RSS |",
        "|---|---|---|",
    ]
    for r in runs:
        rss = "not recorded" if r["peak_rss_mb"] is None else f"{r['peak_rss_mb']} MB"
        lines.append(f"| {_seeds_of(r['seed'])} | {_duration(r['wall_s'])} | {rss} |")
    machines = [(r["seed"], r["machine"]) for r in runs if isinstance(r.get("machine"), dict)]
    if machines:
        head = "| seed | CPU | Python | torch | transformers | numpy |"
        lines += ["", head, "|---|---|---|---|---|---|"]
        for seed, m in machines:
            cells = [m.get(k) or "–" for k in ("python", "torch", "transformers", "numpy")]
            cpu = f"{m.get('cpu') or '–'}, {m.get('cpu_cores') or '–'} cores"
            lines.append(f"| {_seeds_of(seed)} | {cpu} | {' | '.join(map(str, cells))} |")
    spread = record["spread"]
    if any(r["claims"] for r in runs):
        head = " | ".join(seed_label(r["seed"]) for r in runs)
        if any(isinstance(r["seed"], int) for r in runs):
            lines += ["", ONE_MACHINE]
        lines += ["", f"| claim | {head} | sd over seeds |", "|---|" + "---|" * (len(runs) + 1)]
        for i, c in enumerate(runs[0]["claims"]):
            cells = []
            for r in runs:
                o = r["claims"][i] if i < len(r["claims"]) else None
                cells.append(
                    "–"
                    if o is None
                    else f"{_num(o['effect'])} [{_num(o['low'])}, {_num(o['high'])}] {o['verdict']}"
                )
            sd = spread["sd"].get(c["claim"])
            lines.append(f"| {c['claim']} | {' | '.join(cells)} | {_num(sd, '.4f')} |")
    if record.get("table_name") and any(r["table"] for r in runs):
        head = " | ".join(seed_label(r["seed"]) for r in runs)
        lines += [
            "",
            f"Table `{record['table_name']}` (95% interval of each seed):",
            "",
            f"| row / column | {head} | sd over seeds |",
            "|---|" + "---|" * (len(runs) + 1),
        ]
        for key in _series({"runs": [{**r, "claims": []} for r in runs]}):
            row_name, column = key.rsplit(" / ", 1)
            cells = []
            for r in runs:
                row: Mapping[str, Any] = next((x for x in r["table"] if x["row"] == row_name), {})
                cells.append(_cell(row, column))
            sd = _num(spread["sd"].get(key), ".4f")
            lines.append(f"| {key} | {' | '.join(cells)} | {sd} |")
    if spread["band"] is not None:
        lines += [
            "",
            f"Seed-noise band (twice the largest sd over {spread['n_seeds']} seeds): "
            f"**±{spread['band']:.4f}**.",
        ]
    pooled = record.get("pooled")
    if pooled:
        listed = ",".join(str(s) for s in pooled["seeds"])
        lines += [
            "",
            f"Seeds {', '.join(str(s) for s in pooled['seeds'])} pooled in one run "
            f"(`'seeds=[{listed}]'`, every stage reused; intervals over seeds and items, "
            "docs/metrics.md):",
            "",
        ]
        if pooled["claims"]:
            lines += ["| claim | pooled effect [95% CI] | n | verdict |", "|---|---|---|---|"]
        for c in pooled["claims"]:
            effect = "–" if c["effect"] is None else f"{_num(c['effect'])} "
            interval = "" if c["effect"] is None else f"[{_num(c['low'])}, {_num(c['high'])}]"
            n = "–" if c["n"] is None else str(c["n"])
            lines.append(f"| {c['claim']} | {effect}{interval} | {n} | {c['verdict']} |")
        rows = pooled.get("table") or []
        if rows:
            if pooled["claims"]:
                lines.append("")
            lines += [
                f"Table `{record['table_name']}` pooled (95% interval over seeds and texts):",
                "",
                "| row / column | pooled |",
                "|---|---|",
            ]
            for key in _series({"runs": [{"claims": [], "table": rows}]}):
                row_name, column = key.rsplit(" / ", 1)
                row = next((x for x in rows if x["row"] == row_name), {})
                lines.append(f"| {key} | {_cell(row, column)} |")
    if record.get("note"):
        lines += ["", record["note"]]
    return "\n".join(lines)


def markers(name: str) -> tuple[str, str]:
    return f"<!-- measured-run {name} -->", f"<!-- /measured-run {name} -->"


def replace_block(text: str, name: str, block: str) -> str:
    """``text`` with the block between ``name``'s markers replaced by ``block``."""
    start, end = markers(name)
    if text.count(start) != 1 or text.count(end) != 1:
        raise DataError(f"the page needs exactly one '{start}' and one '{end}' line")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{block}\n{end}{tail}"


def block_of(text: str, name: str) -> str | None:
    """The text between ``name``'s markers (None when the page has none)."""
    start, end = markers(name)
    if start not in text or end not in text:
        return None
    return text.split(start, 1)[1].split(end, 1)[0].strip("\n")


def held_numbers(record: Mapping[str, Any]) -> set[str]:
    """Every number a record holds, as the strings a page may quote it by (1 to 4 decimals,
    with and without a sign), and the numbers written in its texts (a claim's "margin of
    0.05")."""
    values: list[float] = []
    quoted: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, bool):
            return
        if isinstance(node, str):
            quoted.update(m.group(0).replace("−", "-") for m in _NUMBER.finditer(node))
        elif isinstance(node, (int, float)):
            values.append(float(node))
        elif isinstance(node, Mapping):
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(record)
    out = set(quoted)
    for v in values:
        for fmt in (".1f", ".2f", ".3f", ".4f"):
            text = format(v, fmt)
            out |= {text, text.lstrip("-"), format(v, "+" + fmt)}
    return out


def unheld(text: str, record: Mapping[str, Any]) -> list[str]:
    """The decimal numbers quoted in ``text`` that ``record`` does not hold."""
    held = held_numbers(record)
    found = [m.group(0).replace("−", "-").replace(",", "") for m in _NUMBER.finditer(text)]
    return [x for x in found if x not in held and x.lstrip("+") not in held]


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

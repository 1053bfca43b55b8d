"""The run folder: resolved config, run record, merged metrics and scores.

Layout (see docs/reports.md)::

    RUN_DIR/config.yaml          resolved config
    RUN_DIR/run.json             experiment, config hash, stages with fingerprints and status
    RUN_DIR/metrics.jsonl        every stage's training/eval scalars, tagged with the stage
    RUN_DIR/results/scores.jsonl every stage's score records
    RUN_DIR/results/items.jsonl  every stage's item sets (the evidence behind its scores)
    RUN_DIR/results/stages.jsonl every stage's build seconds and report files
    RUN_DIR/results/*.csv|.md    tables
    RUN_DIR/plots/*.png          figures
    RUN_DIR/report.md|.html      the report
    RUN_DIR/stages/NAME          link to the stage's cache entry
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from polymnesia.config.checks import check_safe_name
from polymnesia.errors import PolymnesiaError
from polymnesia.io import (
    atomic_write_json,
    atomic_write_text,
    atomic_write_yaml,
    read_jsonl_strict,
)
from polymnesia.items import merge_run_items
from polymnesia.pipeline.integrity import read_marker
from polymnesia.results import STAGES_FILE, stage_record, write_stage_records


def config_hash(config: Any) -> str:
    dumped = config.model_dump(mode="json")
    return hashlib.sha256(json.dumps(dumped, sort_keys=True).encode()).hexdigest()


def default_run_dir(config: Any) -> Path:
    """``runs/NAME-HASH8``: the same config always maps to the same folder (so it resumes)."""

    return Path("runs") / f"{check_safe_name(config.name, 'name')}-{config_hash(config)[:8]}"


def prepare_run_dir(run_dir: Path, config: Any, *, extra: dict[str, Any] | None = None) -> None:
    """Create (or re-open) ``run_dir`` for ``config``; refuse a folder used by another config.

    A folder that cannot be created or written (a file, a read-only place,
    ``/proc``) is refused in one line. ``extra`` is recorded in ``run.json``
    (e.g. ``trust_remote_code``).
    """
    if run_dir.exists() and not run_dir.is_dir():
        raise PolymnesiaError(f"--run-dir {run_dir} is a file, not a folder; pass a folder")
    try:
        _prepare(run_dir, config, extra or {})
    except OSError as e:
        raise PolymnesiaError(
            f"cannot use run folder {run_dir}: {e.strerror or e.__class__.__name__}"
            f"{_where(e.filename, run_dir)}; "
            "pass a writable --run-dir"
        ) from None


def _where(filename: object, run_dir: Path) -> str:
    """`` (PATH)`` when an error names a path other than the run folder (not a descriptor)."""
    if isinstance(filename, str | os.PathLike) and str(filename) != str(run_dir):
        return f" ({filename})"
    return ""


def check_run_dir(run_dir: Path, config: Any) -> None:
    """What :func:`prepare_run_dir` would refuse, without writing anything (``--dry-run``)."""
    if run_dir.exists() and not run_dir.is_dir():
        raise PolymnesiaError(f"--run-dir {run_dir} is a file, not a folder; pass a folder")
    try:
        _check(run_dir, config)
    except OSError as e:
        raise PolymnesiaError(
            f"cannot use run folder {run_dir}: {e.strerror or e.__class__.__name__}; "
            "pass a readable --run-dir"
        ) from None


def _check(run_dir: Path, config: Any) -> None:
    record = run_dir / "run.json"
    h = config_hash(config)
    if record.exists():
        try:
            old = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            old = {}
        if old.get("config_hash") != h:
            raise PolymnesiaError(
                f"run folder {run_dir} already holds a run of a different config "
                f"(hash {str(old.get('config_hash'))[:8]} vs {h[:8]}); pass another --run-dir"
            )
    elif run_dir.exists() and any(p for p in run_dir.iterdir() if p.name != ".lock"):
        raise PolymnesiaError(
            f"run folder {run_dir} exists and is not a polymnesia run; pass another --run-dir"
        )


def _prepare(run_dir: Path, config: Any, extra: dict[str, Any]) -> None:
    record = run_dir / "run.json"
    h = config_hash(config)
    _check(run_dir, config)
    run_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_yaml(run_dir / "config.yaml", config.model_dump(mode="json"))
    if not record.exists():
        atomic_write_json(
            record,
            {"experiment": config.experiment, "name": config.name, "config_hash": h, "stages": {}},
        )
    if extra:
        data = json.loads(record.read_text(encoding="utf-8"))
        atomic_write_json(record, {**data, **extra})


def missing_stages(run_dir: Path, stage_names: list[str]) -> list[str]:
    """The stages of the pipeline that the run folder has not recorded as finished."""
    try:
        done = json.loads((run_dir / "run.json").read_text(encoding="utf-8")).get("stages", {})
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        raise PolymnesiaError(f"{run_dir}/run.json is missing or damaged") from None
    return [name for name in stage_names if name not in done]


def update_run_record(run_dir: Path, stage: str, info: dict[str, Any]) -> None:
    record = run_dir / "run.json"
    data = json.loads(record.read_text(encoding="utf-8"))
    data.setdefault("stages", {})[stage] = info
    atomic_write_json(record, data)


def forget_stages(run_dir: Path, names: list[str]) -> None:
    """Drop ``names`` from the run record and their ``stages/NAME`` links: stages a partial
    run leaves out (:mod:`polymnesia.pipeline.partial`), which an earlier run may have
    recorded."""
    record = run_dir / "run.json"
    data = json.loads(record.read_text(encoding="utf-8"))
    stages = data.get("stages", {})
    if any(n in stages for n in names):
        data["stages"] = {k: v for k, v in stages.items() if k not in names}
        atomic_write_json(record, data)
    for name in names:
        link = run_dir / "stages" / name
        if link.is_symlink():
            link.unlink()


def link_stage(run_dir: Path, name: str, entry: Path) -> None:
    link = run_dir / "stages" / name
    link.parent.mkdir(parents=True, exist_ok=True)
    tmp = link.with_name(f".{name}.tmp-link")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    os.symlink(entry.resolve(), tmp)
    os.replace(tmp, link)


def merge_stage_outputs(run_dir: Path, stage_entries: dict[str, Path]) -> None:
    """Rewrite the run's metrics.jsonl and results/{scores,items,stages}.jsonl from its
    stages' entries: what the reports read, so a report needs the run folder alone.

    The entries are complete, so they are read strictly: a line that does not parse is
    damage, reported in one line (the runner checks them first and rebuilds a damaged one)."""
    metrics: list[str] = []
    scores: list[str] = []
    advice = "run the experiment again: the damaged entry is rebuilt"
    for name, entry in stage_entries.items():
        for rec in read_jsonl_strict(entry / "metrics.jsonl", missing_ok=True, advice=advice):
            metrics.append(json.dumps({"stage": name, **rec}, ensure_ascii=False, sort_keys=True))
        for rec in read_jsonl_strict(entry / "scores.jsonl", missing_ok=True, advice=advice):
            scores.append(json.dumps({**rec, "stage": name}, ensure_ascii=False, sort_keys=True))
    atomic_write_text(run_dir / "metrics.jsonl", "".join(m + "\n" for m in metrics))
    atomic_write_text(run_dir / "results" / "scores.jsonl", "".join(s + "\n" for s in scores))
    merge_run_items(run_dir, stage_entries)
    write_stage_records(
        run_dir / "results" / STAGES_FILE,
        [stage_record(name, entry, _seconds(entry)) for name, entry in stage_entries.items()],
    )


def _seconds(entry: Path) -> float | None:
    seconds = (read_marker(entry) or {}).get("seconds")
    return float(seconds) if isinstance(seconds, (int, float)) else None

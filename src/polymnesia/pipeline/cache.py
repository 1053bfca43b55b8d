"""The stage cache as a whole: which entries exist, which runs use them, pruning.

Each run records the entries it uses in ``$POLYMNESIA_CACHE/runs/ID.json``
(``ID`` hashes the run folder's absolute path), so ``polymnesia cache ls``
can say which runs use an entry, and ``prune --unused`` knows what no
existing run folder needs. Records of run folders that were deleted are
ignored (and removed by ``prune``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from polymnesia.io import atomic_write_json
from polymnesia.paths import cache_dir
from polymnesia.pipeline import builds, integrity
from polymnesia.pipeline.entry_lock import entry_in_use, flock_path, lock_dir


@dataclass
class EntryInfo:
    kind: str
    fingerprint: str
    path: Path
    state: str  # integrity.EntryCheck.state
    detail: str
    size: int  # bytes
    age_s: float  # seconds since the entry was last written
    stage: str  # the stage name it was built as
    runs: list[str] = field(default_factory=list)
    locked: bool = False


def _runs_dir() -> Path:
    return cache_dir() / "runs"


def record_run_usage(run_dir: Path, entries: dict[str, Path]) -> None:
    """Remember that ``run_dir`` uses ``entries`` (stage name -> entry folder)."""
    where = run_dir.resolve()
    rid = hashlib.sha256(str(where).encode()).hexdigest()[:16]
    record = {
        "run_dir": str(where),
        "updated": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "entries": {name: str(path.resolve()) for name, path in entries.items()},
    }
    with contextlib.suppress(
        OSError
    ):  # a read-only cache: usage is not recorded, nothing else changes
        atomic_write_json(_runs_dir() / f"{rid}.json", record)


def run_records(*, live_only: bool = True) -> list[tuple[Path, dict[str, object]]]:
    """(record file, record) of every run that recorded its entries."""
    out = []
    folder = _runs_dir()
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if not isinstance(rec, dict):
            continue
        if live_only and not (Path(str(rec.get("run_dir"))) / "run.json").is_file():
            continue
        out.append((path, rec))
    return out


def users_by_entry() -> dict[str, list[str]]:
    """Entry path -> run folders (existing ones) that use it."""
    users: dict[str, list[str]] = {}
    for _, rec in run_records():
        entries = rec.get("entries")
        for entry in entries.values() if isinstance(entries, dict) else ():
            users.setdefault(str(entry), []).append(str(rec["run_dir"]))
    return users


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def _stage_name(entry: Path) -> str:
    try:
        return str(json.loads((entry / "spec.json").read_text(encoding="utf-8")).get("name", "?"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        return "?"


def entry_paths() -> list[Path]:
    """Every entry folder, and every private build folder (an entry being built, or one whose
    build was interrupted: :mod:`polymnesia.pipeline.builds`)."""
    root = cache_dir() / "stages"
    if not root.is_dir():
        return []
    return sorted(
        e
        for kind in root.iterdir()
        if kind.is_dir()
        for e in kind.iterdir()
        if e.is_dir() and (not e.name.startswith(".") or builds.is_build(e.name))
    )


def _final(entry: Path) -> Path:
    """The entry a folder is or is built for."""
    fp = builds.build_fingerprint(entry.name)
    return entry.parent / fp if fp else entry


def describe(
    entry: Path, *, full: bool = False, users: dict[str, list[str]] | None = None
) -> EntryInfo:
    check = integrity.check_entry(entry, full=full)
    final = _final(entry)
    if final != entry:
        check = integrity.EntryCheck("partial", "private build folder of " + final.name)
    newest = max((p.stat().st_mtime for p in entry.rglob("*")), default=entry.stat().st_mtime)
    return EntryInfo(
        kind=entry.parent.name,
        fingerprint=final.name if final == entry else entry.name,
        path=entry,
        state=check.state,
        detail=check.detail,
        size=_size(entry),
        age_s=max(0.0, time.time() - newest),
        stage=_stage_name(entry),
        runs=sorted((users or {}).get(str(entry.resolve()), [])),
        locked=entry_in_use(final),
    )


def list_entries(*, full: bool = False, only: Iterable[Path] | None = None) -> list[EntryInfo]:
    users = users_by_entry()
    paths = list(only) if only is not None else entry_paths()
    return [describe(p, full=full, users=users) for p in paths]


def prune(
    *,
    partial: bool = False,
    unused: bool = False,
    older_than_s: float = 0.0,
    dry_run: bool = False,
    full: bool = False,
) -> list[EntryInfo]:
    """Remove damaged entries (and interrupted ones with ``partial``, entries no existing
    run uses with ``unused``) older than ``older_than_s``; entries in use are kept.
    ``full`` hashes every file to find damage (else size + mtime)."""
    removed = []
    for info in list_entries(full=full):
        wanted = (
            info.state == "damaged"
            or (partial and info.state == "partial")
            or (unused and info.state in ("ok", "unverified") and not info.runs)
        )
        if not wanted or info.locked or info.age_s < older_than_s:
            continue
        removed.append(info)
        if not dry_run:
            shutil.rmtree(info.path, ignore_errors=True)
            final = _final(info.path)
            if not final.exists() and not builds.builds_of(final):
                flock_path(final).unlink(missing_ok=True)
                shutil.rmtree(lock_dir(final), ignore_errors=True)
    if not dry_run:
        _remove_trash(older_than_s)
        live = {path for path, _ in run_records()}
        for path, _ in run_records(live_only=False):
            if path not in live:
                path.unlink(missing_ok=True)  # the run folder was deleted
    return removed


def _remove_trash(older_than_s: float) -> None:
    """Folders a kill interrupted while they were being deleted (``builds.discard``)."""
    root = cache_dir() / "stages"
    for kind in root.iterdir() if root.is_dir() else ():
        for path in kind.glob(f"{builds.TRASH_PREFIX}*") if kind.is_dir() else ():
            with contextlib.suppress(OSError):
                if time.time() - path.stat().st_mtime >= max(older_than_s, 3600.0):
                    shutil.rmtree(path, ignore_errors=True)


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def human_age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"

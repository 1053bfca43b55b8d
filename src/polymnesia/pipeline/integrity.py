"""Integrity of stage cache entries: a manifest of every file, checked on reuse.

A complete entry's marker (``_complete.json``) lists every file of the entry
with its size, modification time (ns) and SHA-256. Reuse takes the fast path:
each file's size and mtime must match the manifest; a file whose mtime moved
(a copied cache) is hashed, and only a differing hash, a different size or a
missing file makes the entry *damaged*. ``polymnesia cache verify`` hashes
every file. Entries completed by polymnesia before manifests existed have a
marker without ``files``: they are *unverified*; the runner hashes them on
their next reuse ("adopts" them) and checks them from then on.

A complete entry is read strictly: its record files (:data:`RECORD_FILES`,
written in one atomic replace) are parsed on every check, and a line that is
not a JSON object makes the entry *damaged*, even where size and mtime still
match. A manifest row that is not a plain relative path (``..``, absolute) is
damage too, and never followed. Temporary files and folders of interrupted
atomic writes (:func:`is_temporary`) are never listed in a manifest: they are
removed when an entry completes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from polymnesia.errors import PolymnesiaError
from polymnesia.io import atomic_write_json, read_jsonl_strict, sha256_file

MARKER = "_complete.json"
MANIFEST_VERSION = 1
#: an entry's JSONL files that the runner merges into run folders: parsed strictly on each check
RECORD_FILES = ("scores.jsonl", "metrics.jsonl")
#: names of interrupted atomic writes: ``.NAME.XXXX.tmp`` (files and folders of
#: :mod:`polymnesia.io`), ``.tmp_step_N`` (checkpoints), ``.NAME.tmp-link`` (run folder links)
_TEMPORARY = re.compile(r"^\..+\.tmp$|^\.tmp_|^\..+\.tmp-link$")


def is_temporary(name: str) -> bool:
    """Whether ``name`` is a temporary file or folder of an atomic write, never an artifact."""
    return bool(_TEMPORARY.match(name))


def safe_relative(rel: Any) -> bool:
    """Whether a manifest row names a path inside its entry: relative, no ``..``, no ``\\``."""
    if not isinstance(rel, str) or not rel or "\\" in rel or "\x00" in rel:
        return False
    path = PurePosixPath(rel)
    return not path.is_absolute() and all(p not in ("", ".", "..") for p in rel.split("/"))


def entry_files(entry: Path) -> list[Path]:
    """Every regular file under ``entry`` except the marker and temporary files or folders of
    interrupted writes, in a stable order."""
    out = []
    for root, dirs, files in os.walk(entry):
        dirs[:] = sorted(d for d in dirs if not is_temporary(d))
        for name in sorted(files):
            path = Path(root) / name
            if path.is_symlink() or is_temporary(name) or (root == str(entry) and name == MARKER):
                continue
            out.append(path)
    return out


def remove_debris(entry: Path) -> list[str]:
    """Delete the temporary files and folders of interrupted writes anywhere under ``entry``
    (a kill during a model save leaves ``.model.XXXX.tmp/``); their relative paths."""
    found = []
    for root, dirs, files in os.walk(entry):
        for name in sorted([*dirs, *files]):
            if is_temporary(name):
                path = Path(root) / name
                found.append(path.relative_to(entry).as_posix())
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
        dirs[:] = [d for d in dirs if not is_temporary(d)]
    return found


def file_record(path: Path) -> dict[str, Any]:
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256_file(path)}


def build_manifest(entry: Path) -> dict[str, dict[str, Any]]:
    """``{relative path: {size, mtime_ns, sha256}}`` for every file of ``entry``."""
    return {p.relative_to(entry).as_posix(): file_record(p) for p in entry_files(entry)}


def write_marker(entry: Path, info: dict[str, Any]) -> None:
    """Write the completion marker of ``entry`` (last, atomically) with its manifest."""
    atomic_write_json(
        entry / MARKER,
        {**info, "manifest_version": MANIFEST_VERSION, "files": build_manifest(entry)},
    )


def _temporary_row(rel: str) -> bool:
    return any(is_temporary(part) for part in rel.split("/"))


def drop_listed_debris(entry: Path) -> list[str]:
    """Remove temporary files of interrupted writes that an entry completed by an older
    polymnesia lists in its manifest, from the manifest and the disk; the rows removed
    (none when the cache is read-only)."""
    marker = read_marker(entry)
    files = marker.get("files") if marker else None
    if marker is None or not isinstance(files, dict):
        return []
    rows = [rel for rel in files if isinstance(rel, str) and _temporary_row(rel)]
    if not rows:
        return []
    kept = {rel: rec for rel, rec in files.items() if rel not in rows}
    try:
        atomic_write_json(entry / MARKER, {**marker, "files": kept})
    except OSError:
        return []
    remove_debris(entry)
    return rows


def manifest_without_debris(marker: dict[str, Any]) -> dict[str, Any]:
    """``marker`` without manifest rows under temporary names (what an export packs)."""
    files = marker.get("files")
    if not isinstance(files, dict):
        return marker
    return {**marker, "files": {r: v for r, v in files.items() if not _temporary_row(str(r))}}


def read_marker(entry: Path) -> dict[str, Any] | None:
    """The marker's content; ``None`` when absent; ``{}`` when unreadable (a damaged marker)."""
    path = entry / MARKER
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


@dataclass
class EntryCheck:
    """The state of one cache entry."""

    state: str  # "ok" | "unverified" | "damaged" | "partial" | "absent"
    detail: str = ""
    refreshed: dict[str, dict[str, Any]] | None = None  # new mtimes after a hash match

    @property
    def usable(self) -> bool:
        return self.state in ("ok", "unverified")


def _check_file(entry: Path, rel: str, rec: Any, full: bool) -> tuple[str, bool]:
    """("" if fine else what is wrong, whether the mtime moved but the hash matched)."""
    if not safe_relative(rel):
        return f"{rel!r}: manifest row is not a path inside the entry", False
    path = entry / rel
    if not isinstance(rec, dict) or not {"size", "mtime_ns", "sha256"} <= set(rec):
        return f"{rel}: manifest record is malformed", False
    if not path.is_file():
        return f"{rel}: missing", False
    st = path.stat()
    if st.st_size != rec["size"]:
        return f"{rel}: size {st.st_size} bytes, expected {rec['size']}", False
    if not full and st.st_mtime_ns == rec["mtime_ns"]:
        return "", False
    if sha256_file(path) != rec["sha256"]:
        return f"{rel}: sha256 differs from the manifest", False
    return "", st.st_mtime_ns != rec["mtime_ns"]


def _records_problem(entry: Path) -> str:
    """ "" if the entry's record files parse strictly, else which line of which does not."""
    for name in RECORD_FILES:
        try:
            read_jsonl_strict(entry / name, missing_ok=True)
        except PolymnesiaError as e:
            return f"{name}: {str(e).removeprefix(f'{entry / name} is damaged: ')}"
    return ""


def check_entry(entry: Path, *, full: bool = False) -> EntryCheck:
    """Check ``entry`` against its manifest (size + mtime; every hash when ``full``)."""
    marker = read_marker(entry)
    if marker is None:
        return EntryCheck("partial" if entry.exists() else "absent")
    if not marker:
        return EntryCheck("damaged", f"{MARKER}: unreadable")
    files = marker.get("files")
    if files is None:
        damage = _records_problem(entry)
        if damage:
            return EntryCheck("damaged", damage)
        return EntryCheck("unverified", "written without a manifest (older polymnesia)")
    if not isinstance(files, dict):
        return EntryCheck("damaged", f"{MARKER}: malformed manifest")
    moved = []
    for rel, rec in files.items():
        problem, mtime_moved = _check_file(entry, rel, rec, full)
        if problem:
            return EntryCheck("damaged", problem)
        if mtime_moved:
            moved.append(rel)
    damage = _records_problem(entry)
    if damage:
        return EntryCheck("damaged", damage)
    if moved:
        refreshed = {
            rel: {**files[rel], "mtime_ns": (entry / rel).stat().st_mtime_ns} for rel in moved
        }
        return EntryCheck("ok", f"{len(moved)} file(s) touched, hashes match", refreshed)
    return EntryCheck("ok")


def refresh_marker(entry: Path, check: EntryCheck) -> None:
    """Record new mtimes of files whose hashes matched, so the fast path holds next time."""
    marker = read_marker(entry)
    if not marker or not check.refreshed:
        return
    marker["files"] = {**marker.get("files", {}), **check.refreshed}
    with contextlib.suppress(
        OSError
    ):  # a read-only cache stays usable; it is hashed again next time
        atomic_write_json(entry / MARKER, marker)


def adopt_entry(entry: Path) -> bool:
    """Add a manifest to an entry completed before manifests existed; False if read-only."""
    marker = read_marker(entry) or {}
    try:
        write_marker(entry, {**marker, "adopted": True})
    except OSError:
        return False
    return True

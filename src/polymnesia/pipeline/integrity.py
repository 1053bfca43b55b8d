"""Integrity of stage cache entries: a manifest of every file, checked on reuse.

A complete entry's marker (``_complete.json``) lists every file of the entry
with its size, modification time (ns) and SHA-256. Reuse takes the fast path:
each file's size and mtime must match the manifest; a file whose mtime moved
(a copied cache) is hashed, and only a differing hash, a different size or a
missing file makes the entry *damaged*. ``polymnesia cache verify`` hashes
every file. Entries completed by polymnesia before manifests existed have a
marker without ``files``: they are *unverified*; the runner hashes them on
their next reuse ("adopts" them) and checks them from then on.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polymnesia.io import atomic_write_json, sha256_file

MARKER = "_complete.json"
MANIFEST_VERSION = 1


def entry_files(entry: Path) -> list[Path]:
    """Every regular file under ``entry`` except the marker, in a stable order."""
    out = []
    for root, dirs, files in os.walk(entry):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            if path.is_symlink() or (root == str(entry) and name == MARKER):
                continue
            out.append(path)
    return out


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


def check_entry(entry: Path, *, full: bool = False) -> EntryCheck:
    """Check ``entry`` against its manifest (size + mtime; every hash when ``full``)."""
    marker = read_marker(entry)
    if marker is None:
        return EntryCheck("partial" if entry.exists() else "absent")
    if not marker:
        return EntryCheck("damaged", f"{MARKER}: unreadable")
    files = marker.get("files")
    if files is None:
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

"""Where a cache entry is built: a private folder beside it, published by one atomic rename.

An entry ``stages/KIND/FP`` is built in ``stages/KIND/.FP.build-gN-HOST-PID`` (``N`` the lock
generation its builder holds: :mod:`polymnesia.pipeline.entry_lock`) and appears under its
final name only complete, marker included, by ``rename``: a reader never sees a half-built
entry, on a local disk or a shared file system. A builder that finds the entry already
published when it is about to publish (another process built it, its lock having failed)
discards its own copy and uses the published one.

A build that was interrupted (killed, preempted) stays in its folder. The next holder of the
entry's lock, in this process or another, on this host or another, adopts the newest folder
that an earlier holder left (made under an older lock generation, and not by a process of
this host that still runs) by renaming it to its own name, and a resumable stage (training)
continues from its last checkpoint there; a stage that is not resumable starts from an empty
folder. An entry left partial at its final name by an older polymnesia is adopted the same
way.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import socket
import uuid
from pathlib import Path

from polymnesia.errors import PolymnesiaError
from polymnesia.pipeline import integrity

_BUILD = re.compile(r"^\.(?P<fp>[^.]+)\.build-g(?P<gen>[0-9]+)-")
_SAFE = re.compile(r"[^A-Za-z0-9_-]+")
#: folders being deleted (``discard``); one a kill interrupted is removed by ``cache prune``
TRASH_PREFIX = ".trash-"


def _host() -> str:
    return _SAFE.sub("_", socket.gethostname())[:40] or "host"


def build_name(entry: Path, generation: int) -> str:
    return f".{entry.name}.build-g{generation}-{_host()}-{os.getpid()}"


def _abandoned(path: Path, generation: int) -> bool:
    """Whether the holder of lock ``generation`` may take the build folder ``path``: it was
    made under an older generation (whose holder released the lock or was judged dead), and
    not by a process of this host that is still running (one that lost its lock keeps its
    folder; it publishes nothing)."""
    m = _BUILD.match(path.name)
    if m is None or int(m.group("gen")) >= generation:
        return False
    host, _, pid = path.name[m.end() :].rpartition("-")
    if host != _host() or not pid.isdigit() or int(pid) == os.getpid():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def is_build(name: str) -> bool:
    return bool(_BUILD.match(name))


def build_fingerprint(name: str) -> str:
    """The entry name a build folder's name belongs to ("" if it is none)."""
    m = _BUILD.match(name)
    return m.group("fp") if m else ""


def builds_of(entry: Path) -> list[Path]:
    """The private build folders of ``entry`` (interrupted or running), oldest first."""
    found: list[tuple[int, str, Path]] = []
    try:
        names = os.listdir(entry.parent)
    except FileNotFoundError:
        return []
    prefix = f".{entry.name}.build-g"
    for name in names:
        if not name.startswith(prefix):
            continue
        m = _BUILD.match(name)
        path = entry.parent / name
        if m and m.group("fp") == entry.name and path.is_dir() and not path.is_symlink():
            found.append((int(m.group("gen")), name, path))
    return [p for _, _, p in sorted(found)]


def has_partial(entry: Path) -> bool:
    """Whether an interrupted build of ``entry`` exists (a build folder, or an entry without its
    marker left by an older polymnesia)."""
    return bool(builds_of(entry)) or integrity.check_entry(entry).state == "partial"


def discard(path: Path) -> None:
    """Remove a folder: first renamed to a temporary name (so that no one takes a half-deleted
    folder for a build or an entry), then deleted."""
    trash = path.parent / f"{TRASH_PREFIX}{uuid.uuid4().hex[:12]}.tmp"
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def prepare(entry: Path, generation: int, *, resumable: bool) -> tuple[Path, bool]:
    """The private folder to build ``entry`` in, for the holder of lock ``generation``, and
    whether it holds an interrupted build to resume. Call while holding the entry's lock."""
    mine = entry.parent / build_name(entry, generation)
    candidates = [b for b in builds_of(entry) if b == mine or _abandoned(b, generation)]
    if entry.exists() and not integrity.check_entry(entry).usable:
        if resumable and integrity.check_entry(entry).state == "partial":
            candidates.insert(0, entry)  # older than any build folder: an older polymnesia's
        else:
            discard(entry)  # damaged: rebuilt from scratch
    adopted = False
    if resumable:
        for path in reversed(candidates):  # the newest first
            if path == mine:
                adopted = True
                break
            try:
                os.rename(path, mine)
            except FileNotFoundError:
                continue  # adopted by someone else meanwhile
            adopted = True
            break
    for path in candidates:
        if path != mine and path.exists():
            discard(path)
    if adopted:
        has_output = any(mine.iterdir())
        return mine, has_output
    if mine.exists():
        discard(mine)
    entry.parent.mkdir(parents=True, exist_ok=True)
    mine.mkdir()
    return mine, False


def publish(build: Path, entry: Path) -> bool:
    """Rename the complete ``build`` to ``entry``: True. When another process published a
    usable entry first, ``build`` is discarded and the published one kept: False."""
    for _ in range(5):
        try:
            os.rename(build, entry)
            return True
        except FileNotFoundError:
            if integrity.check_entry(entry).usable:
                return False
            raise PolymnesiaError(
                f"cache entry {entry}: this process's build folder {build.name} was adopted by "
                "another process that took its lock as stale; raise POLYMNESIA_LOCK_STALE "
                "above the longest pause of a builder's heartbeat and run again"
            ) from None
        except OSError as e:
            if e.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
        if integrity.check_entry(entry).usable:
            discard(build)
            return False
        with contextlib.suppress(FileNotFoundError):
            discard(entry)  # damaged or partial: replaced by this build
    raise PolymnesiaError(
        f"cannot publish cache entry {entry}: something kept taking its place while {build} "
        "was renamed to it; look for another process writing there"
    )

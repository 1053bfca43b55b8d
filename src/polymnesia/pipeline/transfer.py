"""Moving complete cache entries between machines: one ``.tar.gz`` out, verified on the way in.

A compute node without internet cannot fetch the Bible or a Hub model. Run the
data stages where the network is (``polymnesia run CONFIG --only data``), pack
their entries (:func:`export_entries`, ``polymnesia cache export``), copy the
archive, and unpack it into the other machine's cache
(:func:`import_entries`, ``polymnesia cache import``); the full run there then
reuses those entries, since an entry's path is its kind and fingerprint,
which do not depend on the machine.

The archive holds ``stages/KIND/FINGERPRINT/...`` and nothing else: only
complete entries with a manifest are packed, and on import each entry is
unpacked into a temporary folder inside the cache, every file hashed against
its manifest, then moved into place in one rename. Members outside that
layout, links, devices and absolute or ``..`` paths are refused, and an entry
already complete in the cache is kept as it is.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from polymnesia.errors import PolymnesiaError
from polymnesia.io import lock_is_held
from polymnesia.paths import cache_dir
from polymnesia.pipeline import integrity

_PART = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+=-]*$")


@dataclass
class Imported:
    kind: str
    fingerprint: str
    path: Path
    status: str  # "imported" | "kept" (already complete here)


def _entry_key(entry: Path) -> tuple[str, str]:
    return entry.parent.name, entry.name


def _require_verified(entry: Path, what: str, then: str) -> None:
    """One line (``what is STATE (detail); then``) unless every file of ``entry`` matches its
    manifest."""
    check = integrity.check_entry(entry, full=True)
    if check.state != "ok":
        detail = f" ({check.detail})" if check.detail else ""
        raise PolymnesiaError(f"{what} is {check.state}{detail}; {then}")


def export_entries(entries: Sequence[Path], archive: Path) -> list[Path]:
    """Pack complete ``entries`` into ``archive`` (``.tar.gz``, written atomically); one line
    naming the first entry that is not complete or has no manifest."""
    entries = list({Path(e).resolve(): None for e in entries})  # each entry once
    if not entries:
        raise PolymnesiaError("cache export: no entries to pack; name entries or a run folder")
    archive = Path(archive)
    made: list[Path] = []  # folders made for the archive, removed again if it is not written
    tmp = None
    try:
        if archive.is_dir():
            raise PolymnesiaError(
                f"cache export: {archive} is a folder; name the archive file, "
                f"e.g. {archive / 'entries.tar.gz'}"
            )
        made = [p for p in [archive.parent, *archive.parent.parents] if not p.exists()]
        above = archive.parent.parents[len(made) - 1] if made else archive.parent
        if not above.is_dir():
            raise PolymnesiaError(
                f"cache export: cannot write the archive {archive}: {above} is not a folder"
            )
        archive.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{archive.name}.", dir=archive.parent)
        os.close(fd)  # before the (slow) hashing: an archive that cannot be written fails first
        for entry in entries:
            _require_verified(
                entry,
                f"cache export: {entry}",
                "only complete, verified entries can be packed (run the pipeline first)",
            )
        with tarfile.open(tmp, "w:gz", format=tarfile.PAX_FORMAT) as tar:
            for entry in entries:
                kind, fp = _entry_key(entry)
                for path in [entry / integrity.MARKER, *integrity.entry_files(entry)]:
                    rel = path.relative_to(entry).as_posix()
                    tar.add(path, arcname=f"stages/{kind}/{fp}/{rel}", recursive=False)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a file written in place would be (mkstemp: 0600)
        os.replace(tmp, archive)
    except BaseException as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        for folder in made:  # deepest first
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(exc, OSError):
            reason = exc.strerror or str(exc)
            raise PolymnesiaError(
                f"cache export: cannot write the archive {archive}: {reason}"
            ) from None
        raise
    return entries


def _member_entry(member: tarfile.TarInfo, archive: Path) -> tuple[str, str]:
    """``(kind, fingerprint)`` of a safe archive member; one line for anything else."""
    path = PurePosixPath(member.name)
    parts = path.parts
    bad = (
        path.is_absolute()
        or len(parts) < 4
        or parts[0] != "stages"
        or any(p in ("", ".", "..") for p in parts)
        or not all(_PART.fullmatch(p) for p in parts[1:3])
    )
    if bad or not member.isfile():
        what = "a file" if member.isfile() else "not a regular file"
        raise PolymnesiaError(
            f"cache import: {archive} holds {member.name!r} ({what}); a polymnesia cache "
            "archive holds regular files under stages/KIND/FINGERPRINT/ only"
        )
    return parts[1], parts[2]


def _unpack(archive: Path, into: Path) -> dict[tuple[str, str], int]:
    """Extract the entries of ``archive`` under ``into``; their keys and file counts."""
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
    opened = False
    try:
        with tarfile.open(archive, "r:*") as tar:
            opened = True
            members = [m for m in tar.getmembers() if not m.isdir()]
            groups: dict[tuple[str, str], int] = {}
            for m in members:
                key = _member_entry(m, archive)
                groups[key] = groups.get(key, 0) + 1
            tar.extractall(into, members=members, **safe)  # type: ignore[arg-type]
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        if not opened and isinstance(exc, OSError):
            raise PolymnesiaError(
                f"cache import: cannot read {archive}: {exc.strerror or exc}"
            ) from None
        if not opened:  # tarfile tried each compression: one error each, on several lines
            raise PolymnesiaError(
                f"cache import: {archive} is not a polymnesia cache archive (not a tar.gz/tar file)"
            ) from None
        reason = " ".join(str(exc).split())  # one line
        raise PolymnesiaError(
            f"cache import: {archive} is damaged or not a tar archive ({reason})"
        ) from None
    if not groups:
        raise PolymnesiaError(f"cache import: {archive} holds no cache entries")
    return groups


def import_entries(archive: Path) -> list[Imported]:
    """Unpack ``archive`` into the cache; every entry is verified before any is moved in."""
    archive = Path(archive)
    if archive.is_dir():
        raise PolymnesiaError(
            f"cache import: {archive} is a folder; give the archive file (FILE.tar.gz)"
        )
    if not archive.is_file():
        raise PolymnesiaError(f"cache import: no archive {archive}")
    stages = cache_dir() / "stages"
    stages.mkdir(parents=True, exist_ok=True)
    out: list[Imported] = []
    # beside stages/ (same file system, so entries move in by rename), not inside it, where
    # `cache ls` and `prune` would take a half-unpacked archive for entries
    with tempfile.TemporaryDirectory(prefix=".import-", dir=cache_dir()) as tmp_name:
        tmp = Path(tmp_name)
        todo = []
        for kind, fp in sorted(_unpack(archive, tmp)):
            target = stages / kind / fp
            if integrity.check_entry(target).usable:
                out.append(Imported(kind, fp, target, "kept"))
                continue
            if lock_is_held(target.with_suffix(".lock")):
                raise PolymnesiaError(
                    f"cache import: entry {kind}/{fp} is being built by a running pipeline; "
                    "import again when it has finished"
                )
            staged = tmp / "stages" / kind / fp
            _require_verified(
                staged,
                f"cache import: entry {kind}/{fp} in {archive}",
                "nothing was put into the cache",
            )
            todo.append((kind, fp, staged, target))
        for kind, fp, staged, target in todo:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.exists():  # an interrupted or damaged entry of the same stage
                shutil.rmtree(target)
            os.replace(staged, target)
            integrity.refresh_marker(target, integrity.check_entry(target))
            out.append(Imported(kind, fp, target, "imported"))
    return sorted(out, key=lambda i: (i.kind, i.fingerprint))

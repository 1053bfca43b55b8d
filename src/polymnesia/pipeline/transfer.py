"""Moving complete cache entries between machines: one ``.tar.gz`` out, verified on the way in.

A compute node without internet cannot fetch the Bible or a Hub model. Run the
data stages where the network is (``polymnesia run CONFIG --only data``), pack
their entries (:func:`export_entries`, ``polymnesia cache export``), copy the
archive, and unpack it into the other machine's cache
(:func:`import_entries`, ``polymnesia cache import``); the full run there then
reuses those entries, since an entry's path is its kind and fingerprint,
which do not depend on the machine.

The archive holds ``stages/KIND/FINGERPRINT/...`` and nothing else: only
complete entries with a manifest are packed (exactly the files it lists), and
on import the manifests are authoritative. Before anything is written, every
member must be listed by its entry's manifest with its size, every manifest
row must be a path inside its entry that the archive holds, and the total must
fit the free space; members outside that layout, links and devices are
refused. Then each entry is unpacked into a temporary folder inside the cache,
every file hashed against its manifest, and moved into place in one rename. An
entry already complete in the cache is kept as it is.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from polymnesia.errors import PolymnesiaError
from polymnesia.io import current_umask
from polymnesia.paths import cache_dir
from polymnesia.pipeline import integrity
from polymnesia.pipeline.entry_lock import entry_in_use

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
                _pack(tar, entry)
        os.chmod(tmp, 0o666 & ~current_umask())  # as if written in place (mkstemp: 0600)
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


def _pack(tar: tarfile.TarFile, entry: Path) -> None:
    """Add ``entry`` as ``stages/KIND/FP/...``: its marker and exactly the files its manifest
    lists, less temporary files of interrupted writes (from the marker too)."""
    kind, fp = _entry_key(entry)
    marker = integrity.read_marker(entry) or {}
    packed = integrity.manifest_without_debris(marker)
    head = f"stages/{kind}/{fp}"
    if packed == marker:
        tar.add(entry / integrity.MARKER, arcname=f"{head}/{integrity.MARKER}", recursive=False)
    else:
        data = (json.dumps(packed, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
        info = tar.gettarinfo(entry / integrity.MARKER, arcname=f"{head}/{integrity.MARKER}")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    for rel in sorted(packed.get("files", {})):
        tar.add(entry / rel, arcname=f"{head}/{rel}", recursive=False)


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


#: the most bytes an entry's ``_complete.json`` in an archive may hold before it is read
MAX_MARKER_BYTES = 64 << 20


def _refuse(archive: Path, what: str) -> PolymnesiaError:
    return PolymnesiaError(f"cache import: {archive} {what}; nothing was put into the cache")


def _read_manifest(
    tar: tarfile.TarFile, member: tarfile.TarInfo, key: tuple[str, str], archive: Path
) -> dict[str, Any]:
    """The ``files`` rows of an entry's marker in the archive, each a path inside the entry."""
    where = f"entry {key[0]}/{key[1]}"
    if member.size > MAX_MARKER_BYTES:
        raise _refuse(archive, f"holds a {integrity.MARKER} of {member.size} bytes for {where}")
    f = tar.extractfile(member)
    try:
        marker = json.loads(f.read().decode("utf-8")) if f is not None else None
    except (UnicodeDecodeError, json.JSONDecodeError):
        marker = None
    files = marker.get("files") if isinstance(marker, dict) else None
    if not isinstance(files, dict):
        raise _refuse(archive, f"holds no readable manifest ({integrity.MARKER}) for {where}")
    for rel, rec in files.items():
        if not integrity.safe_relative(rel):
            raise _refuse(
                archive, f"has a manifest row {rel!r} for {where}, not a path inside the entry"
            )
        size = rec.get("size") if isinstance(rec, dict) else None
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise _refuse(archive, f"has a malformed manifest row {rel!r} for {where}")
    return files


def _validated(
    tar: tarfile.TarFile, archive: Path
) -> tuple[list[tarfile.TarInfo], dict[tuple[str, str], int]]:
    """The members to extract and the entries they make, before anything is written: every
    member is a regular file of an entry whose manifest lists it with its size, every
    manifest row is a path inside its entry that the archive holds, and the whole fits."""
    members = [m for m in tar.getmembers() if not m.isdir()]
    by_entry: dict[tuple[str, str], dict[str, tarfile.TarInfo]] = {}
    for m in members:
        key = _member_entry(m, archive)
        rel = "/".join(PurePosixPath(m.name).parts[3:])
        if rel in by_entry.setdefault(key, {}):
            raise _refuse(archive, f"holds {m.name!r} twice")
        by_entry[key][rel] = m
    if not by_entry:
        raise PolymnesiaError(f"cache import: {archive} holds no cache entries")
    total = 0
    for key, held in by_entry.items():
        marker = held.get(integrity.MARKER)
        if marker is None:
            raise _refuse(archive, f"holds entry {key[0]}/{key[1]} without {integrity.MARKER}")
        files = _read_manifest(tar, marker, key, archive)
        for rel, m in held.items():
            if rel == integrity.MARKER:
                continue
            if rel not in files:
                raise _refuse(
                    archive, f"holds {m.name!r}, which the manifest of its entry does not list"
                )
            if m.size != files[rel]["size"]:
                raise _refuse(
                    archive,
                    f"holds {m.name!r} of {m.size} bytes; its manifest says {files[rel]['size']}",
                )
        absent = [rel for rel in files if rel not in held]
        if absent:
            raise _refuse(
                archive,
                f"lacks {absent[0]!r} that the manifest of entry {key[0]}/{key[1]} lists",
            )
        total += sum(m.size for m in held.values())
    free = shutil.disk_usage(_existing(cache_dir())).free
    if total > free:
        raise _refuse(
            archive, f"would unpack {total} bytes, more than the {free} bytes free in the cache"
        )
    return members, {key: len(held) for key, held in by_entry.items()}


def _existing(path: Path) -> Path:
    """``path`` or the nearest folder above it that exists."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


@contextlib.contextmanager
def _reading(archive: Path) -> Iterator[tarfile.TarFile]:
    """``archive`` opened for reading; its read errors as one line each."""
    opened = False
    try:
        with tarfile.open(archive, "r:*") as tar:
            opened = True
            yield tar
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        if not opened and isinstance(exc, OSError):
            raise PolymnesiaError(
                f"cache import: cannot read {archive}: {exc.strerror or exc}"
            ) from None
        if isinstance(exc, OSError) and exc.errno is not None:  # the disk, not the archive
            raise PolymnesiaError(
                f"cache import: cannot unpack {archive} into {cache_dir()}: "
                f"{exc.strerror or exc}; nothing was put into the cache"
            ) from None
        if not opened:  # tarfile tried each compression: one error each, on several lines
            raise PolymnesiaError(
                f"cache import: {archive} is not a polymnesia cache archive (not a tar.gz/tar file)"
            ) from None
        reason = " ".join(str(exc).split())  # one line
        raise PolymnesiaError(
            f"cache import: {archive} is damaged or not a tar archive ({reason})"
        ) from None


def import_entries(archive: Path) -> list[Imported]:
    """Unpack ``archive`` into the cache; every entry is verified before any is moved in.

    Nothing is written before the archive's layout is checked: each member must be listed,
    with its size, by the manifest of its entry; each manifest row must name a path inside
    its entry; the sizes must fit the disk. Then the files are unpacked into a temporary
    folder, hashed against the manifests, and moved in."""
    archive = Path(archive)
    if archive.is_dir():
        raise PolymnesiaError(
            f"cache import: {archive} is a folder; give the archive file (FILE.tar.gz)"
        )
    if not archive.is_file():
        raise PolymnesiaError(f"cache import: no archive {archive}")
    out: list[Imported] = []
    with _reading(archive) as tar:
        members, groups = _validated(tar, archive)
        stages = cache_dir() / "stages"
        stages.mkdir(parents=True, exist_ok=True)
        # beside stages/ (same file system, so entries move in by rename), not inside it,
        # where `cache ls` and `prune` would take a half-unpacked archive for entries
        with tempfile.TemporaryDirectory(prefix=".import-", dir=cache_dir()) as tmp_name:
            tmp = Path(tmp_name)
            if hasattr(tarfile, "data_filter"):
                tar.extractall(tmp, members=members, filter="data")
            else:
                tar.extractall(tmp, members=members)
            todo = []
            for kind, fp in sorted(groups):
                target = stages / kind / fp
                if integrity.check_entry(target).usable:
                    out.append(Imported(kind, fp, target, "kept"))
                    continue
                if entry_in_use(target):
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

"""What ``polymnesia cache ls|verify|prune|export|import`` does: entry folders named by path
or ``KIND/FINGERPRINT`` (one line for a folder that is not an entry: a run folder, a kind's
folder), the entries a run folder recorded, and each action's lines. The command line
(:mod:`polymnesia.cli.cache`) parses and calls :func:`cache_command`."""

from __future__ import annotations

import errno
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from polymnesia.errors import PolymnesiaError
from polymnesia.paths import cache_dir
from polymnesia.pipeline import cache, integrity, transfer
from polymnesia.pipeline.runner import parse_roles
from polymnesia.pipeline.stage import STAGES

Log = Callable[[str], None]


def _stages_parts(path: Path) -> tuple[str, ...] | None:
    """The parts of ``path`` below this cache's ``stages/`` folder; None if it is not there."""
    try:
        return path.resolve().relative_to((cache_dir() / "stages").resolve()).parts
    except (OSError, ValueError):
        return None


def _is_entry(path: Path) -> bool:
    """Whether the folder ``path`` is a cache entry: a folder at ``stages/KIND/ID`` of this
    cache (as ``cache ls`` lists them), or one holding what a stage writes there: its
    ``spec.json`` first (an interrupted entry has only that), its completion marker last."""
    parts = _stages_parts(path)
    if parts is not None:
        return len(parts) == 2
    if (path / integrity.MARKER).is_file():
        return True
    try:
        spec = json.loads((path / "spec.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(spec, dict) and {"kind", "fingerprint"} <= set(spec)


def _not_an_entry(name: str, path: Path, action: str) -> PolymnesiaError:
    """One line saying what the folder ``path`` is instead of a cache entry."""
    stages = cache_dir() / "stages"
    if (path / "run.json").is_file():
        how = (
            f"to pack the entries it uses, give --run {name}"
            if action == "export"
            else f"cache {action} takes entry folders or KIND/FINGERPRINT, or none for all "
            "(polymnesia cache ls shows the runs using each entry)"
        )
        return PolymnesiaError(f"cache {action}: {name} is a run folder, not a cache entry; {how}")
    inside = _stages_parts(path)
    if inside is not None and len(inside) == 1:
        ids = sorted(e.name for e in path.iterdir() if e.is_dir() and e.name[:1] != ".")
        example = f"{inside[0]}/{ids[0]}" if ids else f"{inside[0]}/FINGERPRINT"
        return PolymnesiaError(
            f"cache {action}: {name} holds all {inside[0]} entries, it is not one; "
            f"give KIND/FINGERPRINT, e.g. {example} (see polymnesia cache ls)"
        )
    return PolymnesiaError(
        f"cache {action}: {name} is not a cache entry (an entry is a folder under "
        f"{stages}/<kind>/<id>; give its path or KIND/FINGERPRINT, see polymnesia cache ls)"
    )


def _resolve(names: list[str], action: str) -> list[Path] | None:
    """The entry folders ``names`` (paths or KIND/FINGERPRINT) name; one line for anything
    that is not a cache entry (a run folder, a kind folder, any other folder)."""
    if not names:
        return None
    out = []
    for name in names:
        path = Path(name)
        if not path.is_dir():
            path = cache_dir() / "stages" / name
        if not path.is_dir():
            raise PolymnesiaError(
                f"no cache entry '{name}'; give an entry folder or KIND/FINGERPRINT "
                "(see polymnesia cache ls)"
            )
        if not _is_entry(path):
            raise _not_an_entry(name, path, action)
        out.append(path)
    return out


def _row(info: Any) -> str:
    runs = ", ".join(info.runs) if info.runs else "-"
    state = info.state + (" (in use)" if info.locked else "")
    return (
        f"{info.kind + '/' + info.fingerprint:44s} {info.stage[:28]:28s} {state:18s} "
        f"{cache.human_size(info.size):>9s} {cache.human_age(info.age_s):>7s}  {runs}"
    )


def run_entries(
    run_dir: Path, roles: list[str] | None, *, gone: list[str] | None = None
) -> list[Path]:
    """The cache entries ``run_dir`` recorded (of stages whose role is in ``roles``).

    An entry that is gone is a one-line error, or, with a ``gone`` list, a line appended
    to it (what ``verify`` reports)."""
    try:
        stages = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["stages"]
    except (OSError, ValueError, KeyError, TypeError):
        raise PolymnesiaError(f"--run: {run_dir}/run.json is missing or damaged") from None
    out = []
    for name, info in stages.items():
        kind = info.get("kind", "")
        if roles is None or (kind in STAGES and STAGES.get(kind).category in roles):
            entry = Path(info.get("entry", ""))
            if entry.is_dir():
                out.append(entry)
                continue
            line = f"stage {name}'s cache entry {entry} is gone; run the config again"
            if gone is None:
                raise PolymnesiaError(f"--run: {line}")
            gone.append(line)
    return out


def _import_failed(e: OSError) -> PolymnesiaError:
    """One line for a file-system error of ``cache import``: most often a file where an entry
    folder (or a kind's folder) of the cache belongs, which the import cannot replace."""
    where = f" ({e.filename})" if e.filename else ""
    why = e.strerror or type(e).__name__
    if e.errno in (errno.ENOTDIR, errno.EEXIST, errno.EISDIR) and e.filename:
        return PolymnesiaError(
            f"cache import: {why}{where}: a file stands where a folder of the cache "
            f"{cache_dir()} belongs; move it away and import again"
        )
    return PolymnesiaError(f"cache import: cannot write into the cache: {why}{where}")


def _transfer(
    action: str,
    entries: list[str],
    *,
    archive: str | None,
    run: str | None,
    only: str | None,
    log: Log,
) -> int:
    if action == "import":
        if len(entries) != 1:
            raise PolymnesiaError("cache import: give one archive (polymnesia cache import FILE)")
        try:
            imported = transfer.import_entries(Path(entries[0]))
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise  # a full disk: main says so in one line
            raise _import_failed(e) from None
        for item in imported:
            log(f"{item.status:9s} {item.kind}/{item.fingerprint}")
        return 0
    if not archive:
        raise PolymnesiaError("cache export: give --archive FILE.tar.gz")
    roles = parse_roles(only) if only else None
    paths = _resolve(entries, "export") or []
    if run:
        paths += run_entries(Path(run), roles)
    packed = transfer.export_entries(paths, Path(archive))
    size = cache.human_size(Path(archive).stat().st_size)
    log(f"packed {len(packed)} entries into {archive} ({size})")
    return 0


def cache_command(
    action: str,
    entries: list[str],
    *,
    archive: str | None = None,
    run: str | None = None,
    only: str | None = None,
    partial: bool = False,
    unused: bool = False,
    older_than_days: float = 0.0,
    dry_run: bool = False,
    full: bool = False,
    log: Log = print,
) -> int:
    """``polymnesia cache ACTION`` (ls, verify, prune, export or import): its lines through
    ``log``; the exit status (1: ``verify`` found damaged or missing entries)."""
    if action in ("export", "import"):
        return _transfer(action, entries, archive=archive, run=run, only=only, log=log)
    if action == "ls":
        infos = cache.list_entries()
        log(f"cache: {cache_dir()}")
        log(f"{'entry':44s} {'stage':28s} {'state':18s} {'size':>9s} {'age':>7s}  used by runs")
        for info in infos:
            log(_row(info))
        total = sum(i.size for i in infos)
        log(f"{len(infos)} entries, {cache.human_size(total)}")
        return 0
    if action == "verify":
        chosen, gone = _resolve(entries, "verify"), list[str]()
        if run:
            roles = parse_roles(only) if only else None
            chosen = (chosen or []) + run_entries(Path(run), roles, gone=gone)
        infos = cache.list_entries(full=True, only=chosen)
        bad = len(gone)
        for line in gone:
            log(f"MISSING     {line}")
        for info in infos:
            if info.state == "damaged":
                bad += 1
                log(f"DAMAGED     {info.path}: {info.detail}")
            elif info.state == "unverified":
                log(f"unverified  {info.path}: {info.detail}; it is hashed on its next reuse")
            elif info.state == "partial":
                log(f"partial     {info.path}: interrupted (resumes or reruns on the next run)")
        missing = f", {len(gone)} missing" if run else ""
        log(f"{len(infos)} entries checked, {bad - len(gone)} damaged{missing}")
        return 1 if bad else 0
    removed = cache.prune(
        partial=partial,
        unused=unused,
        older_than_s=older_than_days * 86400,
        dry_run=dry_run,
        full=full,
    )
    verb = "would remove" if dry_run else "removed"
    for info in removed:
        log(f"{verb} {info.path} ({info.state}, {cache.human_size(info.size)})")
    log(f"{verb} {len(removed)} entries, {cache.human_size(sum(i.size for i in removed))}")
    return 0

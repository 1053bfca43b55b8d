"""Atomic file writes and simple locks: no half-written file survives a crash."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import yaml

from polymnesia.errors import PolymnesiaError


def current_umask() -> int:
    """This process's umask (read by setting it and setting it back)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same folder and a rename; a
    folder where the file goes is one :class:`PolymnesiaError` line, before anything is
    written (a rename cannot replace a folder by a file)."""
    path = Path(path)
    if path.is_dir():
        raise PolymnesiaError(
            f"cannot write {path}: a folder of that name is in its place; move or remove the "
            "folder, then run the same command again"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes 0600; give the usual mode
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def sha256_file(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def atomic_write_yaml(path: str | os.PathLike[str], obj: Any) -> None:
    atomic_write_text(path, yaml.safe_dump(obj, sort_keys=False, allow_unicode=True))


def atomic_write_csv(
    path: str | os.PathLike[str], header: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    atomic_write_text(path, buf.getvalue())


def read_json_object(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The JSON object in ``path`` (a run's ``run.json``, a stage's marker); None when the
    file is missing, unreadable, not JSON or not an object: the caller says what that means."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def append_jsonl(path: str | os.PathLike[str], record: dict[str, Any]) -> None:
    """Append one JSON line; a torn last line (from a crash) is skipped by :func:`read_jsonl`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        f.flush()


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a JSONL log that may still be appended to, skipping a line that does not
    parse (the torn last line of an interrupted append). Never for a file that must be whole
    (a complete cache entry's outputs, a run's results): use :func:`read_jsonl_strict`."""
    out: list[dict[str, Any]] = []
    p = Path(path)
    if not p.exists():
        return out
    with open(p, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # torn line from an interrupted write
    return out


def read_jsonl_strict(
    path: str | os.PathLike[str],
    *,
    missing_ok: bool = False,
    advice: str = "",
    torn_tail_ok: bool = False,
) -> list[dict[str, Any]]:
    """Every record of a JSONL file that must be whole: a file written in one atomic replace
    (a complete cache entry's ``scores.jsonl``, a run's results) never holds a torn line, so
    a line that is not a JSON object is damage, reported in one line naming the file and the
    line (``advice`` appended). ``missing_ok``: a missing file holds no records.
    ``torn_tail_ok`` (a file that :func:`append_jsonl` writes to): a last line without its
    newline that does not parse is what an interrupted append leaves, and is skipped; any
    other bad line is still damage."""
    p = Path(path)
    out: list[dict[str, Any]] = []
    tail = f"; {advice}" if advice else ""
    try:
        with open(p, encoding="utf-8") as f:
            for number, line in enumerate(f, start=1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    if torn_tail_ok and not line.endswith("\n"):
                        break  # the last line (only it lacks a newline), torn by a crash
                    raise PolymnesiaError(
                        f"{p} is damaged: line {number} is not valid JSON ({e.msg}){tail}"
                    ) from None
                if not isinstance(rec, dict):
                    raise PolymnesiaError(
                        f"{p} is damaged: line {number} is not a JSON object{tail}"
                    )
                out.append(rec)
    except UnicodeDecodeError:
        raise PolymnesiaError(f"{p} is damaged: it is not UTF-8 text{tail}") from None
    except OSError as e:
        if missing_ok and isinstance(e, FileNotFoundError):
            return []
        raise PolymnesiaError(f"cannot read {p}: {e.strerror}") from None
    return out


def check_jsonl(path: str | os.PathLike[str]) -> int:
    """Count the records of a JSONL file; one line naming the file and line if any is damaged.

    :func:`read_jsonl` skips a torn line (a crash mid-append is expected in a
    log); a results file must be whole, so reports check it with this first.
    """
    advice = "run the experiment again to rebuild it from the stage cache"
    return len(read_jsonl_strict(path, advice=advice))


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary sibling folder that is renamed to ``path`` only on success."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


#: seconds a shared lock (a stage cache entry, a download such as the Bible) is waited for
DEFAULT_LOCK_TIMEOUT = 24 * 3600.0
_LOCK_TIMEOUT: ContextVar[float | None] = ContextVar("polymnesia_lock_timeout", default=None)


def lock_timeout() -> float:
    """How long to wait for a shared lock: what :func:`waiting_for_locks` set (a run's
    ``--lock-timeout``), else ``$POLYMNESIA_LOCK_TIMEOUT``, else 24 h."""
    set_ = _LOCK_TIMEOUT.get()
    if set_ is not None:
        return set_
    try:
        value = float(os.environ.get("POLYMNESIA_LOCK_TIMEOUT", DEFAULT_LOCK_TIMEOUT))
    except ValueError:
        return DEFAULT_LOCK_TIMEOUT
    return value if math.isfinite(value) and value >= 0 else DEFAULT_LOCK_TIMEOUT


@contextlib.contextmanager
def waiting_for_locks(timeout: float) -> Iterator[None]:
    """Within the block, :func:`lock_timeout` is ``timeout``."""
    token = _LOCK_TIMEOUT.set(timeout)
    try:
        yield
    finally:
        _LOCK_TIMEOUT.reset(token)


@contextlib.contextmanager
def file_lock(
    path: str | os.PathLike[str],
    what: str,
    *,
    timeout: float | None = None,
    on_wait: Callable[[str], None] | None = None,
    poll: float = 0.5,
) -> Iterator[None]:
    """Hold an exclusive lock on ``path``.

    ``timeout=None``: refuse at once with one line when another process holds
    it. Otherwise wait up to ``timeout`` seconds (saying so once through
    ``on_wait``), then refuse with one line.
    """
    import fcntl

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        start = time.monotonic()
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if timeout is None:
                    raise PolymnesiaError(
                        f"{what} is in use by another polymnesia process (lock {path}); wait for "
                        "it or use another folder"
                    ) from None
                waited = time.monotonic() - start
                if waited >= timeout:
                    raise PolymnesiaError(
                        f"{what} is still in use by another polymnesia process after {timeout:g} s "
                        f"(lock {path}); run again later or raise --lock-timeout"
                    ) from None
                if on_wait is not None:
                    on_wait(
                        f"waiting for another polymnesia process using {what} "
                        f"(lock {path}; timeout {timeout:g} s)"
                    )
                    on_wait = None
                time.sleep(min(poll, max(0.0, timeout - waited)))
        try:
            f.seek(0)
            f.truncate()
            f.write(str(os.getpid()))
            f.flush()
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def write_jsonl_atomic(path: str | os.PathLike[str], records: Sequence[dict[str, Any]]) -> None:
    """Write all ``records`` as JSON lines in one atomic replace."""
    lines = [json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n" for r in records]
    atomic_write_text(path, "".join(lines))

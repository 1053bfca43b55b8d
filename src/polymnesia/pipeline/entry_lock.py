"""The lock of a stage cache entry: safe where ``flock`` is not (Lustre, NFS without locks).

Jobs on different nodes meet only through ``$POLYMNESIA_CACHE``, and ``flock`` does not hold
across nodes on every shared file system. The lock is therefore a folder of numbered
*generations* next to the entry, ``stages/KIND/.FINGERPRINT.lock/g000000000007.json``. The
newest generation says who holds the lock: its host, process id, the process's start time, the
SLURM job id (``$SLURM_JOB_ID``) if any, and a heartbeat that the holder refreshes while it
builds. Generation ``N + 1`` is claimed by creating its file with a hard link, which fails when
the file exists (atomic on local file systems, Lustre and NFS alike), so of several processes
that find generation ``N`` released or its holder dead exactly one takes it over.

A holder is dead when, on this host (same host name, boot and process namespace), its process
is gone or its pid now names another process (another start time); on another host, when its
heartbeat is older than the staleness (``$POLYMNESIA_LOCK_STALE``, default 600 s), by the
holder's clock or by how long this process has watched it unchanged. A dead holder's lock is
taken over at once, never waited on; a live one is waited for up to the lock timeout.
Where ``flock`` works it is held too (on ``FINGERPRINT.lock``, as older versions did), which
keeps those versions and this one from building the same entry at once; correctness does not
depend on it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from polymnesia.errors import PolymnesiaError
from polymnesia.pipeline.lock_holders import Holder, dead_because, this_process

#: seconds after which the heartbeat of a holder on another host counts as stopped
DEFAULT_STALE_AFTER = 600.0
STALE_ENV = "POLYMNESIA_LOCK_STALE"
_GENERATION = re.compile(r"^g([0-9]{12})\.json$")


def stale_after() -> float:
    """The staleness: ``$POLYMNESIA_LOCK_STALE`` seconds (a positive number), else 600."""
    raw = os.environ.get(STALE_ENV)
    if raw is None or raw.strip() == "":
        return DEFAULT_STALE_AFTER
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise PolymnesiaError(
            f"{STALE_ENV}={raw!r} is not a staleness; give a positive number of seconds "
            f"(default {DEFAULT_STALE_AFTER:g})"
        )
    return value


def lock_dir(entry: Path) -> Path:
    """The folder of ``entry``'s lock generations."""
    return entry.parent / f".{entry.name}.lock"


def flock_path(entry: Path) -> Path:
    return entry.with_suffix(".lock")


def generations(folder: Path) -> list[int]:
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for n in names if (m := _GENERATION.match(n)))


def _gen_path(folder: Path, gen: int) -> Path:
    return folder / f"g{gen:012d}.json"


def read_generation(folder: Path, gen: int) -> Holder | None:
    try:
        return Holder.parse(json.loads(_gen_path(folder, gen).read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


def current_holder(entry: Path) -> tuple[int, Holder | None]:
    """(newest generation, its record) of ``entry``'s lock; (0, None) when it has none."""
    gens = generations(lock_dir(entry))
    if not gens:
        return 0, None
    return gens[-1], read_generation(lock_dir(entry), gens[-1])


def live_holder(entry: Path, stale: float | None = None) -> Holder | None:
    """The holder of ``entry``'s lock if it holds it and is not dead, else None."""
    _, holder = current_holder(entry)
    if holder is None or holder.released:
        return None
    return None if dead_because(holder, stale_after() if stale is None else stale) else holder


def _flock_held_elsewhere(path: Path) -> bool:
    """Whether another open file holds ``flock`` on ``path`` (False where flock is missing)."""
    import fcntl

    if not path.is_file():
        return False
    try:
        with open(path, "a+") as f:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return True
            except OSError:
                return False  # no flock on this file system
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def entry_in_use(entry: Path) -> bool:
    """Whether a live process holds ``entry``'s lock (or, where flock works, its flock)."""
    return live_holder(entry) is not None or _flock_held_elsewhere(flock_path(entry))


class EntryLock:
    """Hold ``entry``'s lock; ``with EntryLock(entry, what, timeout=...)``.

    ``timeout``: seconds to wait for a live holder (None: refuse at once), then one
    :class:`PolymnesiaError` line. ``taken_over`` names the dead holder whose lock was taken
    over, and why it counts as dead."""

    def __init__(
        self,
        entry: Path,
        what: str,
        *,
        timeout: float | None,
        stale: float | None = None,
        heartbeat: float | None = None,
        on_wait: Callable[[str], None] | None = None,
        poll: float = 0.5,
        use_flock: bool = True,
    ) -> None:
        self.entry, self.what, self.timeout = entry, what, timeout
        self.stale = stale_after() if stale is None else stale
        self.heartbeat = min(30.0, self.stale / 10) if heartbeat is None else heartbeat
        self.on_wait, self.poll, self.use_flock = on_wait, poll, use_flock
        self.folder = lock_dir(entry)
        self.generation = 0
        self.taken_over = ""
        self.lost = ""  # set when another process took the lock while this one held it
        self._record: Holder | None = None
        self._flock: IO[str] | None = None
        self._stop = threading.Event()
        self._beater: threading.Thread | None = None
        self._mutex = threading.Lock()

    # -- acquiring -----------------------------------------------------------------------

    def __enter__(self) -> EntryLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def acquire(self) -> None:
        start = time.monotonic()
        watched: dict[tuple[int, str, int], float] = {}
        while True:
            busy = self._try_once(watched)
            if not busy:
                self._beater = threading.Thread(
                    target=self._beat, name=f"lock heartbeat {self.entry.name}", daemon=True
                )
                self._beater.start()
                return
            waited = time.monotonic() - start
            if self.timeout is None:
                raise PolymnesiaError(
                    f"{self.what} is in use by {busy} (lock {self.folder}); wait for it or use "
                    "another folder"
                )
            if waited >= self.timeout:
                raise PolymnesiaError(
                    f"{self.what} is still in use by {busy} after {self.timeout:g} s "
                    f"(lock {self.folder}); run again later or raise --lock-timeout"
                )
            if self.on_wait is not None:
                self.on_wait(
                    f"waiting for another polymnesia process using {self.what} ({busy}; "
                    f"lock {self.folder}; timeout {self.timeout:g} s)"
                )
                self.on_wait = None
            time.sleep(min(self.poll, max(0.0, self.timeout - waited)))

    def _try_once(self, watched: dict[tuple[int, str, int], float]) -> str:
        """Take the lock if it is free or its holder dead: "" when taken, else who holds it."""
        if self.use_flock and not self._take_flock():
            return "another polymnesia process on this host (flock)"
        gens = generations(self.folder)
        top = gens[-1] if gens else 0
        dead = ""
        if top:
            holder = read_generation(self.folder, top)
            if holder is None:
                # written whole by a hard link, so unreadable means damaged: judged by age
                holder = self._unreadable(top)
            if not holder.released:
                key = (top, holder.token, holder.beat)
                first = watched.setdefault(key, time.monotonic())
                dead = dead_because(holder, self.stale, time.monotonic() - first)
                if not dead:
                    self._drop_flock()
                    return holder.describe()
        if not self._claim(top + 1):
            self._drop_flock()
            return "another polymnesia process that took the lock first"
        self.taken_over = dead
        return ""

    def _unreadable(self, gen: int) -> Holder:
        """A generation file that does not parse: a holder that beats never (its mtime)."""
        try:
            mtime = _gen_path(self.folder, gen).stat().st_mtime
        except OSError:
            mtime = 0.0
        return Holder("?", -1, "", "", "", "", f"unreadable-{gen}", mtime, 0, mtime)

    def _claim(self, gen: int) -> bool:
        self.folder.mkdir(parents=True, exist_ok=True)
        record = this_process(uuid.uuid4().hex)
        tmp = self.folder / f".claim-{record.token}.tmp"
        tmp.write_text(json.dumps(asdict(record), sort_keys=True), encoding="utf-8")
        try:
            os.link(tmp, _gen_path(self.folder, gen))  # fails if the generation exists
        except FileExistsError:
            return False
        except OSError as e:
            if e.errno != errno.EEXIST:
                raise
            return False
        finally:
            tmp.unlink(missing_ok=True)
        if generations(self.folder)[-1] != gen:
            # a process that saw an older generation free claimed it after a newer one was
            # taken: the newest generation holds the lock, so this claim is given up
            _gen_path(self.folder, gen).unlink(missing_ok=True)
            return False
        for old in generations(self.folder):
            if old < gen:
                _gen_path(self.folder, old).unlink(missing_ok=True)
        self.generation, self._record = gen, record
        return True

    def _take_flock(self) -> bool:
        import fcntl

        if self._flock is not None:
            return True
        path = flock_path(self.entry)
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "a+")  # noqa: SIM115 (held until release)
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.close()
            return False
        except OSError:  # no flock on this file system: the generations alone decide
            f.close()
            return True
        with contextlib.suppress(OSError):
            f.seek(0)
            f.truncate()
            f.write(str(os.getpid()))
            f.flush()
        self._flock = f
        return True

    def _drop_flock(self) -> None:
        import fcntl

        if self._flock is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._flock.fileno(), fcntl.LOCK_UN)
            self._flock.close()
            self._flock = None

    # -- holding -------------------------------------------------------------------------

    def _still_mine(self) -> bool:
        gens = generations(self.folder)
        if not gens or gens[-1] != self.generation:
            return False
        now = read_generation(self.folder, self.generation)
        return now is not None and self._record is not None and now.token == self._record.token

    def _write(self, **changes: Any) -> None:
        with self._mutex:
            if self._record is None:
                return
            if not self._still_mine():
                self._note_lost()
                return
            for k, v in changes.items():
                setattr(self._record, k, v)
            # replaced whole, but not synced: a record that a crash loses is a dead holder's
            tmp = self.folder / f".write-{self._record.token}.tmp"
            tmp.write_text(json.dumps(asdict(self._record), sort_keys=True), encoding="utf-8")
            os.replace(tmp, _gen_path(self.folder, self.generation))

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat):
            if self._record is None:
                return
            with contextlib.suppress(OSError):
                self._write(beat=self._record.beat + 1, beat_time=time.time())

    def held(self) -> bool:
        """Whether this process still holds the lock (False once another process took it over,
        judging this one dead: then ``lost`` says who)."""
        with self._mutex:
            if self._record is not None and not self._still_mine():
                self._note_lost()
        return not self.lost

    def _note_lost(self) -> None:
        if not self.lost:
            _, holder = current_holder(self.entry)
            who = holder.describe() if holder is not None else "another process"
            self.lost = f"{who} took over the lock of {self.entry}"

    def set_build(self, name: str) -> None:
        """Record the private folder this holder builds in."""
        self._write(build=name, beat_time=time.time())

    def release(self) -> None:
        self._stop.set()
        if self._beater is not None:
            self._beater.join()
            self._beater = None
        with contextlib.suppress(OSError):
            self._write(released=True, beat_time=time.time())
        self._record = None
        self._drop_flock()

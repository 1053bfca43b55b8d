"""Who holds a stage cache entry's lock, and whether it is dead: a :class:`Holder` names a
process by host, boot and process namespace (:func:`this_process`), pid and start time
(:func:`process_start`), SLURM job id and heartbeat; :func:`dead_because` says why a holder
is dead (on this host: its process is gone or its pid names another process; on another
host: its heartbeat is older than the staleness), or None. Read by
:mod:`polymnesia.pipeline.entry_lock`."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from typing import Any


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def process_start(pid: int) -> str:
    """The start time of process ``pid`` (clock ticks since boot, from ``/proc``); "" where
    there is no ``/proc`` or no such process."""
    stat = _read_text(f"/proc/{pid}/stat")
    if ")" not in stat:
        return ""
    fields = stat.rsplit(")", 1)[1].split()
    return fields[19] if len(fields) > 19 else ""


def _machine() -> dict[str, str]:
    """What makes two processes "on the same host" for pid checks."""
    try:
        pid_ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pid_ns = ""
    return {
        "host": socket.gethostname(),
        "boot": _read_text("/proc/sys/kernel/random/boot_id").strip(),
        "pid_ns": pid_ns,
    }


@dataclass
class Holder:
    """One generation of an entry's lock: who holds (or held) it."""

    host: str
    pid: int
    start: str  # the process's start time (process_start), "" where unknown
    boot: str
    pid_ns: str
    slurm_job: str
    token: str  # unique per acquisition
    acquired: float  # the holder's clock (time.time())
    beat: int  # heartbeats so far
    beat_time: float  # the holder's clock at the last heartbeat
    released: bool = False
    build: str = ""  # the private folder the holder builds in (a name beside the entry)

    def describe(self) -> str:
        job = f", SLURM job {self.slurm_job}" if self.slurm_job else ""
        return f"process {self.pid} on {self.host}{job}"

    @classmethod
    def parse(cls, data: Any) -> Holder | None:
        if not isinstance(data, dict):
            return None
        try:
            return cls(
                host=str(data["host"]),
                pid=int(data["pid"]),
                start=str(data.get("start", "")),
                boot=str(data.get("boot", "")),
                pid_ns=str(data.get("pid_ns", "")),
                slurm_job=str(data.get("slurm_job", "")),
                token=str(data["token"]),
                acquired=float(data["acquired"]),
                beat=int(data.get("beat", 0)),
                beat_time=float(data["beat_time"]),
                released=bool(data.get("released", False)),
                build=str(data.get("build", "")),
            )
        except (KeyError, TypeError, ValueError):
            return None


def this_process(token: str) -> Holder:
    now = time.time()
    m = _machine()
    return Holder(
        host=m["host"],
        pid=os.getpid(),
        start=process_start(os.getpid()),
        boot=m["boot"],
        pid_ns=m["pid_ns"],
        slurm_job=os.environ.get("SLURM_JOB_ID", ""),
        token=token,
        acquired=now,
        beat=0,
        beat_time=now,
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by another user
    return True


def dead_because(
    holder: Holder, stale: float, watched_for: float = 0.0, *, now: float | None = None
) -> str:
    """Why ``holder`` is dead ("" while it may be alive). ``watched_for``: seconds this
    process has seen the same heartbeat."""
    m = _machine()
    if holder.host == m["host"] and holder.boot == m["boot"] and holder.pid_ns == m["pid_ns"]:
        if not _pid_alive(holder.pid):
            return f"{holder.describe()} has ended"
        start = process_start(holder.pid)
        if holder.start and start and start != holder.start:
            return f"{holder.describe()} has ended (its pid names another process now)"
        return ""
    if holder.host == m["host"] and holder.boot and m["boot"] and holder.boot != m["boot"]:
        return f"{holder.host} was restarted since {holder.describe()} took the lock"
    age = (time.time() if now is None else now) - holder.beat_time
    if age > stale:
        return f"the heartbeat of {holder.describe()} is {age:.0f} s old (staleness {stale:g} s)"
    if watched_for > stale:
        return (
            f"the heartbeat of {holder.describe()} has not moved for {watched_for:.0f} s "
            f"(staleness {stale:g} s)"
        )
    return ""

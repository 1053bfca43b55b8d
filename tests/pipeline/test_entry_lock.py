"""The stage cache's entry lock without flock: dead holders are taken over, live ones waited for,
and a takeover is won by one process; the publish by rename keeps the first entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.pipeline import builds, entry_lock, integrity, lock_holders
from polymnesia.pipeline.entry_lock import EntryLock
from polymnesia.pipeline.lock_holders import Holder

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _plant(entry: Path, gen: int = 3, **fields: object) -> Holder:
    """Write generation ``gen`` of ``entry``'s lock as held by a process of this host."""
    now = time.time()
    m = lock_holders._machine()
    holder = Holder(
        host=m["host"],
        pid=os.getpid(),
        start=lock_holders.process_start(os.getpid()),
        boot=m["boot"],
        pid_ns=m["pid_ns"],
        slurm_job="",
        token=f"planted-{gen}",
        acquired=now,
        beat=0,
        beat_time=now,
    )
    for k, v in fields.items():
        setattr(holder, k, v)
    folder = entry_lock.lock_dir(entry)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"g{gen:012d}.json").write_text(json.dumps(asdict(holder)))
    return holder


def _ended_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _lock(entry: Path, **kw: object) -> EntryLock:
    args: dict[str, object] = {"timeout": None, "stale": 600.0, "use_flock": False, "poll": 0.02}
    return EntryLock(entry, "entry X", **{**args, **kw})  # type: ignore[arg-type]


def test_a_holder_whose_process_ended_on_this_host_is_taken_over_at_once(tmp_path: Path) -> None:
    entry = tmp_path / "stages" / "k" / "fp"
    pid = _ended_pid()
    _plant(entry, pid=pid, slurm_job="4242")
    with _lock(entry) as lock:  # timeout None: a wait would raise
        assert f"process {pid} on " in lock.taken_over and "SLURM job 4242" in lock.taken_over
        assert "has ended" in lock.taken_over and lock.generation == 4
        gen, holder = entry_lock.current_holder(entry)
        assert gen == 4 and holder is not None and holder.pid == os.getpid()
        assert entry_lock.generations(entry_lock.lock_dir(entry)) == [4]  # older ones removed
    _, holder = entry_lock.current_holder(entry)
    assert holder is not None and holder.released and entry_lock.live_holder(entry) is None


def test_a_pid_that_names_another_process_now_is_a_dead_holder(tmp_path: Path) -> None:
    entry = tmp_path / "fp"
    _plant(entry, start="1")  # this pid, but another start time: the pid was reused
    with _lock(entry) as lock:
        assert "its pid names another process now" in lock.taken_over


def test_a_holder_on_another_host_is_judged_by_its_heartbeat(tmp_path: Path) -> None:
    entry = tmp_path / "fp"
    _plant(entry, host="node-b", pid=1, beat_time=time.time() - 10)
    with pytest.raises(PolymnesiaError, match=r"entry X is in use by process 1 on node-b \("):
        _lock(entry).acquire()
    with pytest.raises(PolymnesiaError) as e:
        _lock(entry, timeout=0.2).acquire()
    assert "still in use by process 1 on node-b after 0.2 s" in str(e.value)
    assert "\n" not in str(e.value)
    _plant(entry, host="node-b", pid=1, beat_time=time.time() - 700)
    with _lock(entry) as lock:
        assert "heartbeat of process 1 on node-b is 700 s old (staleness 600 s)" in lock.taken_over


def test_a_heartbeat_that_stops_moving_is_stale_whatever_the_holder_s_clock(tmp_path: Path) -> None:
    entry = tmp_path / "fp"
    _plant(entry, host="node-b", pid=1, beat_time=time.time() + 3600)  # a clock an hour ahead
    t0 = time.monotonic()
    with _lock(entry, timeout=10, stale=0.3) as lock:
        assert "has not moved for" in lock.taken_over
    assert 0.3 <= time.monotonic() - t0 < 5


def test_a_beating_holder_on_another_host_is_waited_for_until_it_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    entry = tmp_path / "fp"
    holder = _lock(entry, heartbeat=0.05, stale=0.5)
    holder.acquire()
    real = lock_holders._machine()
    monkeypatch.setattr(lock_holders, "_machine", lambda: {**real, "host": "node-b"})
    with pytest.raises(PolymnesiaError, match="still in use by process"):
        _lock(entry, timeout=1.2, stale=0.5).acquire()  # its heartbeat moves: alive
    holder._stop.set()  # the holder's node dies: no more heartbeats, no release
    assert holder._beater is not None
    holder._beater.join()
    with _lock(entry, timeout=10, stale=0.5) as taker:
        assert "heartbeat of process" in taker.taken_over
    holder._write(beat=99)  # a holder that lost its lock notices and writes nothing
    assert "took over the lock" in holder.lost


def test_a_live_holder_blocks_until_it_releases_without_flock(tmp_path: Path) -> None:
    entry = tmp_path / "fp"
    code = (
        "import sys, time\nfrom pathlib import Path\n"
        "from polymnesia.pipeline.entry_lock import EntryLock\n"
        "with EntryLock(Path(sys.argv[1]), 'x', timeout=None, use_flock=False):\n"
        "    print('holding', flush=True)\n"
        "    sys.stdin.readline()\n"
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(entry)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "holding"
        assert entry_lock.live_holder(entry) is not None
        with pytest.raises(PolymnesiaError, match=f"in use by process {child.pid} on "):
            _lock(entry, timeout=0.3).acquire()
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.flush()
        assert child.wait(30) == 0
    finally:
        child.kill()
    with _lock(entry) as lock:
        assert lock.taken_over == ""  # released, not taken over


def test_a_dead_holder_is_taken_over_by_one_process_at_a_time(tmp_path: Path) -> None:
    entry, inside, go = tmp_path / "fp", tmp_path / "inside", tmp_path / "go"
    _plant(entry, pid=_ended_pid())
    code = (
        "import os, sys, time\nfrom pathlib import Path\n"
        "from polymnesia.pipeline.entry_lock import EntryLock\n"
        "entry, inside, go = map(Path, sys.argv[1:4])\n"
        "while not go.exists():\n    time.sleep(0.005)\n"
        "with EntryLock(entry, 'x', timeout=60, use_flock=False, poll=0.01) as lock:\n"
        "    fd = os.open(inside, os.O_CREAT | os.O_EXCL | os.O_WRONLY)\n"  # raises if shared
        "    time.sleep(0.15)\n"
        "    os.close(fd)\n"
        "    os.unlink(inside)\n"
        "    print(repr(lock.taken_over))\n"
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    args = [str(entry), str(inside), str(go)]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(4)
    ]
    time.sleep(2.5)  # let them import and wait on the go file
    go.touch()
    outs = [c.communicate(timeout=60) for c in children]
    assert [c.returncode for c in children] == [0, 0, 0, 0], [err for _, err in outs]
    took_over = [out for out, _ in outs if "has ended" in out]
    assert len(took_over) == 1, outs  # the others found it released by the one before them


def test_the_staleness_comes_from_the_environment_or_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(entry_lock.STALE_ENV, raising=False)
    assert entry_lock.stale_after() == 600.0
    monkeypatch.setenv(entry_lock.STALE_ENV, "90")
    assert entry_lock.stale_after() == 90.0
    for bad in ("soon", "0", "-5", "nan", "inf"):
        monkeypatch.setenv(entry_lock.STALE_ENV, bad)
        with pytest.raises(PolymnesiaError) as e:
            entry_lock.stale_after()
        assert str(e.value) == (
            f"POLYMNESIA_LOCK_STALE={bad!r} is not a staleness; give a positive number of "
            "seconds (default 600)"
        )


def _complete_build(entry: Path, value: str, generation: int) -> Path:
    """A finished build folder, as a holder of lock ``generation`` leaves it."""
    build = entry.parent / builds.build_name(entry, generation)
    build.mkdir(parents=True)
    (build / "value.txt").write_text(value)
    integrity.write_marker(build, {"fingerprint": "fp"})
    return build


def test_the_first_publish_wins_and_a_second_builder_s_copy_is_discarded(tmp_path: Path) -> None:
    entry = tmp_path / "stages" / "k" / "fp"
    first, second = _complete_build(entry, "1", 1), _complete_build(entry, "2", 2)
    assert first != second and first.name.startswith(".fp.build-g1-")
    assert builds.publish(first, entry) is True
    assert builds.publish(second, entry) is False
    assert (entry / "value.txt").read_text() == "1" and integrity.check_entry(entry).state == "ok"
    assert not first.exists() and not second.exists()
    assert sorted(p.name for p in entry.parent.iterdir()) == ["fp"]  # nothing left beside it


def test_the_next_holder_adopts_the_newest_interrupted_build(tmp_path: Path) -> None:
    entry = tmp_path / "fp"
    old, new = _complete_build(entry, "old", 1), _complete_build(entry, "new", 2)
    (old / "_complete.json").unlink()
    (new / "_complete.json").unlink()  # two interrupted builds: the newest has the most done
    mine, resumed = builds.prepare(entry, 5, resumable=True)
    assert resumed and mine.name == builds.build_name(entry, 5)
    assert (mine / "value.txt").read_text() == "new" and builds.builds_of(entry) == [mine]
    fresh, resumed = builds.prepare(entry, 6, resumable=False)
    assert not resumed and not any(fresh.iterdir()) and builds.builds_of(entry) == [fresh]
    with pytest.raises(PolymnesiaError, match=r"was adopted by another process that took its"):
        builds.publish(mine, entry)  # adopted away: one line, nothing published


def test_a_damaged_entry_is_replaced_by_the_publish(tmp_path: Path) -> None:
    entry = tmp_path / "fp"
    good = _complete_build(entry, "1", 1)
    entry.mkdir()
    (entry / "_complete.json").write_text("{not json")
    assert integrity.check_entry(entry).state == "damaged"
    assert builds.publish(good, entry) is True and (entry / "value.txt").read_text() == "1"


def test_threads_of_one_process_take_turns(tmp_path: Path) -> None:
    entry, order = tmp_path / "fp", []

    def hold(name: str) -> None:
        with _lock(entry, timeout=30, use_flock=True):
            order.append(f"{name} in")
            time.sleep(0.1)
            order.append(f"{name} out")

    threads = [threading.Thread(target=hold, args=(n,)) for n in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert order in (["a in", "a out", "b in", "b out"], ["b in", "b out", "a in", "a out"])


def test_cache_ls_lists_build_folders_and_prune_keeps_them_while_their_lock_is_held(
    isolated_cache: Path,
) -> None:
    from polymnesia.pipeline import cache

    entry = isolated_cache / "stages" / "kind" / "0123abcd"
    lock = _lock(entry, use_flock=True)
    lock.acquire()
    build, _ = builds.prepare(entry, lock.generation, resumable=True)
    (build / "half.txt").write_text("x")
    [info] = cache.list_entries()
    assert info.path == build and info.state == "partial" and info.locked
    assert info.detail == "private build folder of 0123abcd"
    assert cache.prune(partial=True) == [] and build.exists()  # a live builder's
    lock.release()
    [removed] = cache.prune(partial=True)
    assert removed.path == build and not build.exists()
    assert sorted(p.name for p in entry.parent.iterdir()) == []  # its lock files went too

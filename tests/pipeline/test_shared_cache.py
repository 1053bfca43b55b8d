"""Two builders on one stage cache, and a builder killed mid-stage (issue 43, item 2).

The builders are processes running ``cache_race.py`` (toy stages a -> b, a -> c (resumable, in
steps), b + c -> d on ``$POLYMNESIA_CACHE``): with the lock, each entry is built once; without
flock too; with no lock at all, each is published once. Nothing is torn and both end with the
same scores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import asdict
from pathlib import Path

import pytest
from cache_race import STEPS, Value, race_specs

from polymnesia.io import atomic_write_text
from polymnesia.pipeline import builds, entry_lock, integrity
from polymnesia.pipeline.runner import plan, run_pipeline
from polymnesia.pipeline.stage import STAGES, Stage, StageContext, StageSpec
from polymnesia.results import Score

SCRIPT = str(Path(__file__).with_name("cache_race.py"))
SRC = str(Path(__file__).resolve().parents[2] / "src")
EXPECTED = {"a": 1.0, "b": 3.0, "c": 16.0, "d": 23.0}  # c = a + 3 in each of 5 steps


def _start(mode: str, log: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, str(Path(SCRIPT).parent)])}
    return subprocess.Popen(
        [sys.executable, SCRIPT, mode, str(log), *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _race(mode: str, log: Path) -> tuple[list[dict[str, object]], str]:
    runs = [_start(mode, log), _start(mode, log)]
    deadline = time.monotonic() + 60
    while len(list(log.parent.glob(f"{log.name}.ready.*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    Path(f"{log}.go").touch()
    outs = [r.communicate(timeout=120) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], [err for _, err in outs]
    return [json.loads(out.splitlines()[-1]) for out, _ in outs], "".join(e for _, e in outs)


def _values(summary: dict[str, object]) -> dict[str, float]:
    scores = summary["scores"]
    assert isinstance(scores, dict)
    return {name: rows[0]["value"] for name, rows in scores.items()}


def _whole(summary: dict[str, object]) -> None:
    entries = summary["entries"]
    assert isinstance(entries, dict)
    for path in entries.values():
        entry = Path(path)
        assert integrity.check_entry(entry, full=True).state == "ok", entry
        assert builds.builds_of(entry) == []  # no build folder left behind
        assert entry_lock.live_holder(entry) is None


@pytest.mark.parametrize("mode", ["lock", "noflock"])
def test_two_builders_on_one_cache_build_each_entry_once(
    isolated_cache: Path, tmp_path: Path, mode
):  # type: ignore[no-untyped-def]
    log = tmp_path / "built.log"
    (a, b), _ = _race(mode, log)
    built = Counter(line.split()[0] for line in log.read_text().splitlines())
    assert built == Counter({"a": 1, "b": 1, "c": 1, "d": 1})
    assert a == b and _values(a) == EXPECTED
    _whole(a)


def test_without_any_lock_each_entry_is_published_once(isolated_cache: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    log = tmp_path / "built.log"
    (a, b), err = _race("nolock", log)
    built = Counter(line.split()[0] for line in log.read_text().splitlines())
    discarded = Counter(
        line.split("] ", 1)[1].split(":", 1)[0]
        for line in err.splitlines()
        if "published" in line and "this run's copy discarded" in line
    )
    assert set(built) == {"a", "b", "c", "d"} and sum(discarded.values()) >= 1  # they raced
    for name in built:  # built twice only where one copy was thrown away
        assert built[name] - discarded[name] == 1, (built, discarded)
    assert a == b and _values(a) == EXPECTED
    _whole(a)


def test_a_builder_killed_mid_stage_leaves_a_lock_the_next_run_takes_over(
    isolated_cache: Path, tmp_path: Path
):  # type: ignore[no-untyped-def]
    log = tmp_path / "built.log"
    killed = _start("lock", log, "kill-at=2")
    _, err = killed.communicate(timeout=120)
    assert killed.returncode == -9, err
    c = plan(race_specs())[2]
    _, holder = entry_lock.current_holder(c.entry)
    assert holder is not None and holder.pid == killed.pid and not holder.released
    [build] = builds.builds_of(c.entry)
    assert holder.build == build.name and sorted(os.listdir(build / "steps")) == ["1.txt", "2.txt"]
    assert [p.status for p in plan(race_specs())] == ["reuse", "reuse", "resume", "run"]
    lines: list[str] = []
    entries = run_pipeline(race_specs(), None, log=lines.append)
    took = [line for line in lines if "took over the lock" in line]
    assert len(took) == 1 and f"process {killed.pid} on " in took[0] and "has ended" in took[0]
    assert "[polymnesia] resume c (race_steps)" in lines
    writers = [(entries["c"] / "steps" / f"{i}.txt").read_text().split()[1] for i in range(1, 6)]
    assert writers == [str(killed.pid)] * 2 + [str(os.getpid())] * (STEPS - 2)  # resumed exactly
    assert _values({"scores": {k: _scores(v) for k, v in entries.items()}}) == EXPECTED
    _whole({"entries": {k: str(v) for k, v in entries.items()}})
    assert [p.status for p in plan(race_specs())] == ["reuse"] * 4


def _scores(entry: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (entry / "scores.jsonl").read_text().splitlines()]


@STAGES.register("race_overtaken", "loses its lock while it runs (tests only)")
class Overtaken(Stage[Value]):
    """While this stage runs, a builder on another node judges its process dead, takes its lock
    over, publishes its own build of the entry after a while and releases the lock."""

    def run(self, ctx: StageContext) -> list[Score]:
        entry = ctx.out_dir.parent / builds.build_fingerprint(ctx.out_dir.name)
        folder = entry_lock.lock_dir(entry)
        gen, me = entry_lock.current_holder(entry)
        assert me is not None
        other = {**asdict(me), "host": "node-b", "pid": 1, "token": "b", "beat_time": time.time()}
        taken = folder / f"g{gen + 1:012d}.json"
        taken.write_text(json.dumps(other))

        def publish_theirs() -> None:
            time.sleep(0.6)
            theirs = entry.parent / ".theirs"
            theirs.mkdir()
            (theirs / "value.txt").write_text("theirs")
            (theirs / "scores.jsonl").write_text("")
            integrity.write_marker(theirs, {"fingerprint": "by node-b"})
            os.rename(theirs, entry)
            taken.write_text(json.dumps({**other, "released": True}))

        threading.Thread(target=publish_theirs).start()
        atomic_write_text(ctx.out_dir / "value.txt", "mine")
        return []


def test_a_builder_that_lost_its_lock_publishes_nothing_and_reuses_the_other_build(
    isolated_cache: Path,
):  # type: ignore[no-untyped-def]
    lines: list[str] = []
    spec = StageSpec("x", "race_overtaken", Value(value=0))
    entry = run_pipeline([spec], None, log=lines.append, lock_timeout=30)["x"]
    assert (entry / "value.txt").read_text() == "theirs" and builds.builds_of(entry) == []
    lost = [line for line in lines if "its copy is discarded" in line]
    assert len(lost) == 1 and "process 1 on node-b took over the lock of" in lost[0], lines
    assert any("waiting for another polymnesia process" in line for line in lines), lines
    assert lines[-1] == "[polymnesia] reuse  x (race_overtaken): built by another run"

"""Toy stages for the shared-cache tests, and a child process that runs them.

    python tests/pipeline/cache_race.py MODE BUILT_LOG [kill-at=K]

runs :func:`race_specs` on ``$POLYMNESIA_CACHE`` (once ``BUILT_LOG.go`` exists: the test starts
its builders together) and prints one JSON line: each stage's entry
and its scores. Every time a stage's ``run`` starts it appends ``NAME PID`` to ``BUILT_LOG``.
MODE says how entries are locked: ``lock`` (as shipped), ``noflock`` (the lock files alone, as on
a file system without flock), ``nolock`` (no lock at all: only the publish by rename keeps the
cache whole). ``kill-at=K``: the resumable stage SIGKILLs its process after its step K.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from polymnesia.config.base import StrictModel
from polymnesia.io import atomic_write_text, read_jsonl
from polymnesia.pipeline import entry_lock
from polymnesia.pipeline.runner import run_pipeline
from polymnesia.pipeline.stage import STAGES, Stage, StageContext, StageSpec
from polymnesia.results import Score

STEPS = 5


class Value(StrictModel):
    value: int
    pause: float = 0.2


def _built(ctx: StageContext) -> None:
    log = os.environ.get("RACE_BUILT_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{ctx.spec.name} {os.getpid()}\n")


@STAGES.register("race_value", "writes its value, slowly (tests only)")
class RaceValue(Stage[Value]):
    def run(self, ctx: StageContext) -> list[Score]:
        _built(ctx)
        time.sleep(ctx.params.pause)
        total = ctx.params.value + sum(
            int((p / "value.txt").read_text()) for p in ctx.inputs.values()
        )
        atomic_write_text(ctx.out_dir / "value.txt", str(total))
        return [Score("m", "en", "value", float(total))]


@STAGES.register("race_steps", "adds its value in STEPS resumable steps (tests only)")
class RaceSteps(Stage[Value]):
    resumable = True

    def run(self, ctx: StageContext) -> list[Score]:
        _built(ctx)
        steps = ctx.out_dir / "steps"
        steps.mkdir(exist_ok=True)
        total = int((ctx.input("src") / "value.txt").read_text())
        kill_at = int(os.environ.get("RACE_KILL_AT", "0"))
        for i in range(1, STEPS + 1):
            done = steps / f"{i}.txt"
            if not done.exists():  # a resumed build keeps the steps it finished
                time.sleep(ctx.params.pause / STEPS)
                atomic_write_text(done, f"{ctx.params.value} {os.getpid()}")
                if i == kill_at:
                    sys.stdout.flush()
                    os.kill(os.getpid(), signal.SIGKILL)
            total += int(done.read_text().split()[0])
        atomic_write_text(ctx.out_dir / "value.txt", str(total))
        return [Score("m", "en", "value", float(total))]


def race_specs(pause: float = 0.2) -> list[StageSpec]:
    """a -> b, a -> c (resumable, in steps), b + c -> d."""
    return [
        StageSpec("a", "race_value", Value(value=1, pause=pause)),
        StageSpec("b", "race_value", Value(value=2, pause=pause), {"x": "a"}),
        StageSpec("c", "race_steps", Value(value=3, pause=pause), {"src": "a"}),
        StageSpec("d", "race_value", Value(value=4, pause=pause), {"x": "b", "y": "c"}),
    ]


def summary(entries: dict[str, Path]) -> dict[str, object]:
    return {
        "entries": {k: str(v) for k, v in entries.items()},
        "scores": {k: read_jsonl(v / "scores.jsonl") for k, v in entries.items()},
    }


def main(argv: list[str]) -> int:
    mode, log = argv[0], argv[1]
    STAGES._loaded = True  # only the toy stages: the shipped ones (torch, transformers) stay out
    os.environ["RACE_BUILT_LOG"] = log
    for arg in argv[2:]:
        if arg.startswith("kill-at="):
            os.environ["RACE_KILL_AT"] = arg.split("=", 1)[1]
    if mode == "noflock":
        real_init = entry_lock.EntryLock.__init__

        def init(self: entry_lock.EntryLock, *args: object, **kwargs: object) -> None:
            real_init(self, *args, **{**kwargs, "use_flock": False})  # type: ignore[arg-type]

        entry_lock.EntryLock.__init__ = init  # type: ignore[method-assign]
    elif mode == "nolock":
        entry_lock.EntryLock.acquire = lambda self: None  # type: ignore[method-assign]
        entry_lock.EntryLock.release = lambda self: None  # type: ignore[method-assign]
    go = Path(f"{log}.go")
    Path(f"{log}.ready.{os.getpid()}").touch()
    while not go.exists() and "RACE_KILL_AT" not in os.environ:  # start together
        time.sleep(0.01)
    entries = run_pipeline(race_specs(), None, log=lambda m: print(m, file=sys.stderr))
    print(json.dumps(summary(entries)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

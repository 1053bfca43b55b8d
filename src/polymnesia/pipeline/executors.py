"""Executors: who runs a pipeline's stages, and where.

``inline`` (the default) runs every stage in this process, one after another
(:func:`polymnesia.pipeline.runner.run_pipeline`). ``local`` runs the stages whose inputs
are complete side by side, as child processes on this machine, at most ``jobs`` at a time
(:func:`run_local`). The stage cache is the only hand-off: a child builds its stages into their
cache entries (under each entry's lock, as any run does) and exits; the stages that need them
start once their entries are complete. Each child gets its own slot: one GPU of
``CUDA_VISIBLE_DEVICES`` where the machine has at least ``jobs`` of them, else an equal share of
the CPU threads (``OMP_NUM_THREADS``, unless the caller set it). When exactly one stage uses
a stage's output, the same child builds that stage next (:func:`chain`), so a chain of short
stages pays one process start-up. A child's output goes to ``RUN_DIR/logs/FIRST_STAGE.log``.
A stage that fails stops only the stages that need it: the others run to the end, and the
result names the failed stage, its log and what it held back.

The graph here is the plan's own (:func:`stage_graph`): a stage waits for the stages named in
its inputs. The run folder and the report are then written by an inline pass over the same
plan, which reuses every entry, so they are those of an inline run.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from polymnesia.errors import ConfigError
from polymnesia.pipeline.integrity import MARKER
from polymnesia.pipeline.runner import PlannedStage

EXECUTORS = ("inline", "local")
#: how often the driver looks at its children (seconds)
POLL = 0.2


def check_executor(name: str, jobs: int | None) -> None:
    """One line for an unknown executor or a ``--jobs`` it cannot use."""
    if name not in EXECUTORS:
        raise ConfigError(
            f"--executor {name!r} is not an executor; accepted: {', '.join(EXECUTORS)}"
        )
    if jobs is not None and name != "local":
        raise ConfigError(f"--jobs needs --executor local (got --executor {name})")
    if jobs is not None and not 1 <= jobs <= 256:
        raise ConfigError(f"--jobs {jobs} is out of range; accepted: 1 to 256 concurrent stages")


def stage_graph(planned: Sequence[PlannedStage]) -> dict[str, set[str]]:
    """Each stage's name -> the names of the stages it takes inputs from."""
    return {p.spec.name: set(p.spec.inputs.values()) for p in planned}


def slots(jobs: int, gpus: int, cpus: int) -> list[dict[str, str]]:
    """The environment of each of ``jobs`` slots: a GPU each when there are enough of them,
    otherwise an equal share of ``cpus`` threads (at least one)."""
    if gpus >= jobs > 0:
        return [{"CUDA_VISIBLE_DEVICES": str(i)} for i in range(jobs)]
    threads = str(max(1, cpus // max(1, jobs)))
    return [{"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads} for _ in range(jobs)]


@dataclass
class LocalResult:
    """What :func:`run_local` did: the stages it built, the ones that failed (with their log
    files) and the ones it did not start because a stage they need failed."""

    built: list[str] = field(default_factory=list)
    failed: dict[str, Path] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)
    held_back: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed


def _dependants(graph: dict[str, set[str]], failed: str) -> set[str]:
    out: set[str] = set()
    todo = [failed]
    while todo:
        name = todo.pop()
        for stage, needs in graph.items():
            if name in needs and stage not in out:
                out.add(stage)
                todo.append(stage)
    return out


def chain(
    first: str, graph: dict[str, set[str]], pending: Sequence[str], done: set[str]
) -> list[str]:
    """``first`` and the stages after it that nothing else waits for: while the last stage
    of the chain is needed by exactly one stage, which needs nothing that is not done or in
    the chain, that stage joins it. One child then builds the whole chain (a sequence of
    lifelong steps, a tokenizer and its pretraining), paying its start-up once; no stage of
    the chain could have started earlier in a child of its own."""
    out = [first]
    while True:
        users = [n for n, needs in graph.items() if out[-1] in needs]
        if len(users) != 1 or users[0] not in pending or users[0] in out:
            return out
        if not graph[users[0]] <= done | set(out):
            return out
        out.append(users[0])


def run_local(
    planned: Sequence[PlannedStage],
    command: Callable[[list[str]], list[str]],
    logs: Path,
    jobs: int,
    *,
    log: Callable[[str], None] = print,
    env: dict[str, str] | None = None,
    gpus: int = 0,
    cpus: int | None = None,
) -> LocalResult:
    """Build every stage of ``planned`` that is not reused, at most ``jobs`` children at a
    time, once the stages it needs are complete: each child is ``command(stages)`` for a
    :func:`chain` of stages, its output in ``logs/FIRST_STAGE.log``.

    Children inherit ``env`` (default: this process's environment) with their slot's settings
    (:func:`slots`); ``OMP_NUM_THREADS`` set in ``env`` is kept. A child that fails has built
    the stages of its chain whose entries are complete; the first that is not failed. Ctrl-C
    stops the children and is raised again."""
    base = dict(os.environ if env is None else env)
    pool = slots(jobs, gpus, cpus if cpus is not None else (os.cpu_count() or 1))
    if "OMP_NUM_THREADS" in base:
        pool = [{k: v for k, v in s.items() if not k.endswith("_NUM_THREADS")} for s in pool]
    graph = stage_graph(planned)
    entries = {p.spec.name: p.entry for p in planned}
    done = {p.spec.name for p in planned if p.status == "reuse"}
    waiting = [p.spec.name for p in planned if p.status != "reuse"]
    result = LocalResult()
    running: dict[str, tuple[subprocess.Popen[bytes], int, float, IO[bytes], list[str]]] = {}
    free = list(range(len(pool)))
    logs.mkdir(parents=True, exist_ok=True)
    try:
        while waiting or running:
            for name in [n for n in waiting if graph[n] <= done]:
                if not free or name not in waiting:
                    continue
                stages = chain(name, graph, waiting, done)
                slot, path = free.pop(0), logs / f"{name}.log"
                out = open(path, "wb")  # noqa: SIM115 (closed when the child ends)
                child = subprocess.Popen(
                    command(stages),
                    env={**base, **pool[slot]},
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
                running[name] = (child, slot, time.monotonic(), out, stages)
                waiting = [n for n in waiting if n not in stages]
                log(f"[polymnesia] start  {' > '.join(stages)} (slot {slot}, log {path})")
            finished = [n for n, (c, *_rest) in running.items() if c.poll() is not None]
            for name in finished:
                child, slot, started, stream, stages = running.pop(name)
                stream.close()
                free.append(slot)
                free.sort()
                took = round(time.monotonic() - started, 1)
                ok = stages if child.returncode == 0 else []
                if child.returncode:
                    ok = [s for s in stages if (entries[s] / MARKER).is_file()]
                    ok = stages[: next((i for i, s in enumerate(stages) if s not in ok), 0)]
                for s in stages:
                    result.logs[s] = logs / f"{name}.log"
                    result.seconds[s] = took
                done.update(ok)
                result.built.extend(ok)
                if child.returncode == 0:
                    log(f"[polymnesia] done   {' > '.join(stages)} ({took:.1f} s)")
                    continue
                bad = stages[len(ok)]
                result.failed[bad] = logs / f"{name}.log"
                held = (_dependants(graph, bad) | set(stages[len(ok) + 1 :])) & (
                    set(waiting) | set(stages)
                )
                waiting = [n for n in waiting if n not in held]
                result.held_back.extend(sorted(held))
                log(
                    f"[polymnesia] failed {bad} (exit {child.returncode}); its log: "
                    f"{logs / f'{name}.log'}"
                    + (f"; not started: {', '.join(sorted(held))}" if held else "")
                )
            if not running and waiting and not any(graph[n] <= done for n in waiting):
                raise ConfigError(  # cannot happen for a checked plan: inputs come first
                    f"stages {', '.join(waiting)} wait for stages that are not in the plan"
                )
            if not finished:
                time.sleep(POLL)
    except BaseException:
        for child, *_rest in running.values():
            child.terminate()
        for child, *_rest in running.values():
            try:
                child.wait(timeout=30)
            except subprocess.TimeoutExpired:
                child.kill()
        raise
    return result

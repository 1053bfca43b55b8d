"""A stage graph laid out on a cluster of identical nodes: pure arithmetic, no SLURM.

``polymnesia plan --schedule NODESxGPUS`` asks what a run would take on a cluster before it is
submitted. Each job (a stage) needs some GPUs for an estimated time and starts once every job
it needs has ended. :func:`schedule` is a list scheduler: whenever GPUs free up, the ready job
with the longest remaining path to the end of the graph (its critical path) starts first, on
the node with the fewest free GPUs that still holds it (best fit), or on whole free nodes when
it needs more GPUs than one node has. A job that needs no GPU (preparing data, a report
table) runs beside the others at once. The result is an estimate, as good as the times it is
given; it ignores queue waits and start-up, which ``docs/scale.md`` measures.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from polymnesia.errors import PolymnesiaError


@dataclass(frozen=True)
class Job:
    """One stage to place: ``gpus`` devices for ``seconds``, after every job in ``needs``."""

    name: str
    seconds: float
    gpus: int = 1
    needs: tuple[str, ...] = ()


@dataclass
class Schedule:
    """When and where each job runs; ``makespan`` is the whole graph's length and
    ``sequential`` the sum of every job's time (one job at a time)."""

    start: dict[str, float] = field(default_factory=dict)
    end: dict[str, float] = field(default_factory=dict)
    nodes: dict[str, tuple[int, ...]] = field(default_factory=dict)

    @property
    def makespan(self) -> float:
        return max(self.end.values(), default=0.0)


def sequential_seconds(jobs: Sequence[Job]) -> float:
    """The jobs one after another, each on its own GPUs: what ``--executor inline`` does."""
    return sum(j.seconds for j in jobs)


def critical_path(jobs: Sequence[Job]) -> dict[str, float]:
    """Each job's time plus the longest chain of jobs that need it, to the end of the graph."""
    by_name = _check(jobs)
    after: dict[str, list[str]] = {name: [] for name in by_name}
    for job in jobs:
        for up in job.needs:
            after[up].append(job.name)
    tail: dict[str, float] = {}
    for name in reversed(_topological(jobs, by_name)):
        tail[name] = by_name[name].seconds + max((tail[d] for d in after[name]), default=0.0)
    return tail


def schedule(jobs: Sequence[Job], nodes: int, gpus_per_node: int) -> Schedule:
    """Lay ``jobs`` out on ``nodes`` nodes of ``gpus_per_node`` GPUs each (see the module
    docstring); one line for a job that no node count can hold."""
    if nodes < 1 or gpus_per_node < 1:
        raise PolymnesiaError(f"a cluster needs nodes and GPUs, got {nodes} x {gpus_per_node}")
    by_name = _check(jobs)
    for job in jobs:
        if _nodes_for(job.gpus, gpus_per_node) > nodes:
            raise PolymnesiaError(
                f"stage '{job.name}' needs {job.gpus} GPUs; the cluster has {nodes} x "
                f"{gpus_per_node}"
            )
    priority = critical_path(jobs)
    waiting = {j.name: set(j.needs) for j in jobs}
    free = [gpus_per_node] * nodes
    out = Schedule()
    ready = [name for name, ups in waiting.items() if not ups]
    running: list[tuple[float, str]] = []  # (end time, job) heap
    now = 0.0
    while ready or running:
        ready.sort(key=lambda n: (-priority[n], n))
        for name in list(ready):
            placed = _place(by_name[name].gpus, free, gpus_per_node)
            if placed is None:
                continue
            ready.remove(name)
            for node in placed:
                free[node] -= min(by_name[name].gpus, gpus_per_node)
            out.start[name], out.nodes[name] = now, placed
            out.end[name] = now + by_name[name].seconds
            heapq.heappush(running, (out.end[name], name))
        if not running:
            raise AssertionError("a ready job fits no node")  # excluded above
        now, name = heapq.heappop(running)
        finished = [name]
        while running and running[0][0] <= now:
            finished.append(heapq.heappop(running)[1])
        for done in finished:
            for node in out.nodes[done]:
                free[node] += min(by_name[done].gpus, gpus_per_node)
            for other, ups in waiting.items():
                if done in ups:
                    ups.discard(done)
                    if not ups and other not in out.start:
                        ready.append(other)
    return out


def _place(gpus: int, free: list[int], per_node: int) -> tuple[int, ...] | None:
    """The nodes a job of ``gpus`` GPUs starts on now, or None: none for a CPU job, the
    fullest node that holds it, or the first whole free nodes for a multi-node job."""
    if gpus == 0:
        return ()
    if gpus <= per_node:
        fits = [n for n, f in enumerate(free) if f >= gpus]
        return (min(fits, key=lambda n: (free[n], n)),) if fits else None
    whole = [n for n, f in enumerate(free) if f == per_node]
    need = _nodes_for(gpus, per_node)
    return tuple(whole[:need]) if len(whole) >= need else None


def _nodes_for(gpus: int, per_node: int) -> int:
    return max(1, math.ceil(gpus / per_node))


def _check(jobs: Sequence[Job]) -> Mapping[str, Job]:
    by_name: dict[str, Job] = {}
    for job in jobs:
        if job.name in by_name:
            raise PolymnesiaError(f"stage '{job.name}' is given twice")
        if job.seconds < 0 or job.gpus < 0:
            raise PolymnesiaError(f"stage '{job.name}': time and GPUs must not be negative")
        by_name[job.name] = job
    for job in jobs:
        for up in job.needs:
            if up not in by_name:
                raise PolymnesiaError(f"stage '{job.name}' needs '{up}', which is not a stage")
    return by_name


def _topological(jobs: Sequence[Job], by_name: Mapping[str, Job]) -> list[str]:
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(name: str) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise PolymnesiaError(f"the stages form a cycle through '{name}'")
        state[name] = 1
        for up in by_name[name].needs:
            visit(up)
        state[name] = 2
        order.append(name)

    for job in jobs:
        visit(job.name)
    return order

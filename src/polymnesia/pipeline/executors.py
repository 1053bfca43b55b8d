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
plan, which reuses every entry, so they are those of an inline run; after a failure, over
the stages of the arms that finished (:mod:`polymnesia.pipeline.partial`).

A launcher whose groups outlive the driver (SLURM jobs) can re-attach to them: the status
file keeps what it needs (:attr:`Started.attach`), and a driver started again on the same
run waits on a group that still runs instead of launching it twice.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from polymnesia.errors import ConfigError
from polymnesia.io import atomic_write_json
from polymnesia.pipeline.integrity import MARKER
from polymnesia.pipeline.runner import PlannedStage

EXECUTORS = ("inline", "local", "slurm")
#: how often the driver looks at its children (seconds)
POLL = 0.2


def check_executor(name: str, jobs: int | None) -> None:
    """One line for an unknown executor or a ``--jobs`` it cannot use."""
    if name not in EXECUTORS:
        raise ConfigError(
            f"--executor {name!r} is not an executor; accepted: {', '.join(EXECUTORS)}"
        )
    if jobs is not None and name not in ("local", "slurm"):
        raise ConfigError(f"--jobs needs --executor local or slurm (got --executor {name})")
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
    """What :func:`run_graph` (:func:`run_local`, the slurm executor) did: the stages it built,
    the ones that failed (with their log files) and the ones it did not start because a stage
    they need failed; for each stage it started, its log, wall time (from its start or
    submission), where it ran (``slot 0``, ``job 123``) and how many times it was started."""

    built: list[str] = field(default_factory=list)
    failed: dict[str, Path] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)
    held_back: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)
    attempts: dict[str, int] = field(default_factory=dict)

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


@dataclass
class Started:
    """A launched group of stages: the launcher's own handle, its log file and where it runs
    (``slot 0``, ``job 123``), said in the driver's lines and the status file."""

    handle: Any
    log: Path
    where: str
    #: why it ended, when the launcher knows (a SLURM state: ``TIMEOUT``, ``CANCELLED``)
    note: str = ""
    #: the machine it runs on, once the launcher knows
    node: str = ""
    #: what a restarted driver needs to wait on it instead of starting it again (a SLURM
    #: job's id and submitit folder), kept in the status file; {} where it cannot
    attach: dict[str, str] = field(default_factory=dict)


class Launcher(Protocol):
    """How :func:`run_graph` starts stages: child processes (:class:`LocalLauncher`) or SLURM
    jobs (:mod:`polymnesia.pipeline.slurm`)."""

    #: the driver's word for a start ("start", "submit")
    verb: str

    def start(self, stages: list[str], slot: int) -> Started:
        """Launch ``stages`` (built in that order) in ``slot`` (0 to ``jobs`` - 1)."""
        ...

    def poll(self, running: dict[str, Started]) -> dict[str, tuple[str, int | None]]:
        """Each running group's state (``queued``, ``running`` or ``ended``) and, once it ended,
        its exit status (0: every stage built)."""
        ...

    def stop(self, running: list[Started]) -> None:
        """Stop what is still running (Ctrl-C on the driver)."""
        ...


def _attach(launcher: Launcher) -> Callable[[list[str], dict[str, str]], Started | None] | None:
    """The launcher's ``attach(stages, record)``, where it has one: the group a previous
    driver launched (``record``: its :attr:`Started.attach`), when it still runs, else None.
    The SLURM launcher has one (a job outlives its driver); child processes do not."""
    return getattr(launcher, "attach", None)


def _previous(status: Path | None) -> dict[str, dict[str, Any]]:
    """The stages of the status file a previous driver of the run left (none: {})."""
    if status is None or not status.is_file():
        return {}
    try:
        stages = json.loads(status.read_text(encoding="utf-8")).get("stages", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return stages if isinstance(stages, dict) else {}


class LocalLauncher:
    """Child processes on this machine, ``command(stages)`` each, a slot's environment each
    (:func:`slots`), output in ``logs/FIRST_STAGE.log``."""

    verb = "start"

    def __init__(
        self,
        command: Callable[[list[str]], list[str]],
        logs: Path,
        pool: list[dict[str, str]],
        base: dict[str, str],
    ) -> None:
        self.command, self.logs, self.pool, self.base = command, logs, pool, base

    def start(self, stages: list[str], slot: int) -> Started:
        path = self.logs / f"{stages[0]}.log"
        out = open(path, "wb")  # noqa: SIM115 (closed when the child ends)
        child = subprocess.Popen(
            self.command(stages),
            env={**self.base, **self.pool[slot]},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        return Started((child, out), path, f"slot {slot}", node=socket.gethostname())

    def poll(self, running: dict[str, Started]) -> dict[str, tuple[str, int | None]]:
        out: dict[str, tuple[str, int | None]] = {}
        for name, s in running.items():
            child, stream = s.handle
            code = child.poll()
            if code is not None:
                stream.close()
            out[name] = ("running", None) if code is None else ("ended", code)
        return out

    def stop(self, running: list[Started]) -> None:
        for s in running:
            s.handle[0].terminate()
        for s in running:
            try:
                s.handle[0].wait(timeout=30)
            except subprocess.TimeoutExpired:
                s.handle[0].kill()
            s.handle[1].close()


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
    status: Path | None = None,
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
    logs.mkdir(parents=True, exist_ok=True)
    launcher = LocalLauncher(command, logs, pool, base)
    return run_graph(planned, launcher, jobs, log=log, status=status)


Group = Callable[[str, dict[str, set[str]], Sequence[str], set[str]], list[str]]


def run_graph(
    planned: Sequence[PlannedStage],
    launcher: Launcher,
    jobs: int,
    *,
    log: Callable[[str], None] = print,
    group: Group = chain,
    attempts: int = 1,
    status: Path | None = None,
    poll: float = POLL,
) -> LocalResult:
    """Build every stage of ``planned`` that is not reused through ``launcher``, at most
    ``jobs`` groups at a time, each group (``group``: a :func:`chain` by default) once the
    stages it needs are complete.

    A group that fails has built the stages whose entries are complete; the first that is not
    failed. It is started again, from that stage, until it has been started ``attempts``
    times (an interrupted training resumes from its last checkpoint); then the stages that
    need it are held back and the others run on. ``status`` (a JSON file) holds each stage's
    state, where it runs, its log, attempts and times, rewritten when one changes
    (``polymnesia status``). Ctrl-C stops what is running and is raised again."""
    graph = stage_graph(planned)
    entries = {p.spec.name: p.entry for p in planned}
    done = {p.spec.name for p in planned if p.status == "reuse"}
    waiting = [p.spec.name for p in planned if p.status != "reuse"]
    result = LocalResult()
    board: dict[str, dict[str, Any]] = {
        p.spec.name: {"state": "reused" if p.spec.name in done else "waiting", "attempts": 0}
        for p in planned
    }
    written: list[str] = []

    def publish() -> None:
        if status is not None:
            text = repr(board)
            if not written or written[-1] != text:
                atomic_write_json(
                    status, {"stages": board, "order": list(board), "updated": time.time()}
                )
                written[:] = [text]

    running: dict[str, tuple[Started, int, float, list[str]]] = {}
    free = list(range(jobs))

    def launch(stages: list[str], slot: int, first_try: bool) -> None:
        started = launcher.start(stages, slot)
        running[stages[0]] = (started, slot, time.monotonic(), stages)
        for s in stages:
            result.attempts[s] = result.attempts.get(s, 0) + 1
            board[s].update(
                state="queued", where=started.where, log=str(started.log), submitted=time.time()
            )
            board[s]["attempts"] = result.attempts[s]
            if started.attach:
                board[s]["attach"] = started.attach
        word = launcher.verb if first_try else "retry"
        tries = f", attempt {result.attempts[stages[0]]} of {attempts}" if not first_try else ""
        log(
            f"[polymnesia] {word:<6} {' > '.join(stages)} ({started.where}, log {started.log}"
            f"{tries})"
        )

    attach = _attach(launcher)
    previous = _previous(status) if attach is not None else {}
    groups: dict[str, list[str]] = {}  # a previous driver's groups that may still run
    for name in waiting:
        old = previous.get(name)
        live = isinstance(old, dict) and old.get("state") in ("queued", "running")
        if live and isinstance(old, dict) and isinstance(old.get("attach"), dict) and old["attach"]:
            groups.setdefault(json.dumps(old["attach"], sort_keys=True), []).append(name)
    for key, stages in groups.items():
        started = attach(stages, json.loads(key)) if attach is not None else None
        if started is None:  # it ended meanwhile: what it did not build waits as any stage
            continue
        slot = free.pop(0) if free else -1  # -1: over --jobs, no slot to give back
        running[stages[0]] = (started, slot, time.monotonic(), stages)
        waiting = [n for n in waiting if n not in stages]
        for s in stages:
            old = previous[s]
            result.attempts[s] = int(old.get("attempts") or 1)
            board[s].update(
                state=str(old["state"]),
                where=started.where,
                log=str(started.log),
                submitted=float(old.get("submitted") or time.time()),
                attempts=result.attempts[s],
                attach=started.attach,
            )
            if "started" in old:
                board[s]["started"] = old["started"]
        log(
            f"[polymnesia] attach {' > '.join(stages)} ({started.where}, submitted by an "
            f"earlier driver of this run, log {started.log})"
        )
    try:
        while waiting or running:
            for name in [n for n in waiting if graph[n] <= done]:
                if not free or name not in waiting:
                    continue
                stages = group(name, graph, waiting, done)
                waiting = [n for n in waiting if n not in stages]
                launch(stages, free.pop(0), True)
            publish()
            states = launcher.poll({n: r[0] for n, r in running.items()})
            for name, (state, _code) in states.items():
                node = running[name][0].node
                for s in running[name][3]:
                    if node:
                        board[s]["node"] = node
                    if state == "running" and board[s]["state"] == "queued":
                        board[s].update(state="running", started=time.time())
            finished = [n for n, (state, _code) in states.items() if state == "ended"]
            for name in finished:
                started, slot, t0, stages = running.pop(name)
                code = states[name][1] or 0
                if slot >= 0:
                    free.append(slot)
                    free.sort()
                took = round(time.monotonic() - t0, 1)
                ok = stages if code == 0 else []
                if code:
                    built = [s for s in stages if (entries[s] / MARKER).is_file()]
                    ok = stages[: next((i for i, s in enumerate(stages) if s not in built), 0)]
                for s in stages:
                    result.logs[s] = started.log
                    result.seconds[s] = took
                    result.where[s] = started.where
                    board[s].update(ended=time.time(), seconds=took)
                for s in ok:
                    board[s]["state"] = "done"
                done.update(ok)
                result.built.extend(ok)
                if code == 0:
                    log(f"[polymnesia] done   {' > '.join(stages)} ({took:.1f} s)")
                    continue
                bad = stages[len(ok)]
                why = f"{started.where}, {started.note or f'exit {code}'}"
                if result.attempts[bad] < attempts:
                    log(
                        f"[polymnesia] failed {bad} ({why}); its log: {started.log}; "
                        "starting it again"
                    )
                    launch(stages[len(ok) :], free.pop(0) if free else -1, False)
                    continue
                result.failed[bad] = started.log
                board[bad]["state"] = "failed"
                held = _dependants(graph, bad) & (set(waiting) | set(stages))
                for s in held:
                    board[s]["state"] = "held back"
                # stages of the group after the failed one that do not need it wait again
                rest = [s for s in stages[len(ok) + 1 :] if s not in held]
                for s in rest:
                    board[s]["state"] = "waiting"
                waiting = rest + [n for n in waiting if n not in held]
                result.held_back.extend(sorted(held))
                log(
                    f"[polymnesia] failed {bad} ({why}); its log: {started.log}"
                    + (f"; not started: {', '.join(sorted(held))}" if held else "")
                )
            publish()
            if not running and waiting and not any(graph[n] <= done for n in waiting):
                raise ConfigError(  # cannot happen for a checked plan: inputs come first
                    f"stages {', '.join(waiting)} wait for stages that are not in the plan"
                )
            if not finished:
                time.sleep(poll)
    except BaseException:
        launcher.stop([r[0] for r in running.values()])
        for _started, _slot, _t0, stages in running.values():
            for s in stages:
                board[s]["state"] = "stopped"
        publish()
        raise
    return result


#: the order of states in ``polymnesia status``'s summary
STATES = ("running", "queued", "waiting", "done", "reused", "failed", "held back", "stopped")


def describe_status(path: Path, now: float | None = None) -> str:
    """``polymnesia status``: one row per stage of a run's status file (:func:`run_graph`):
    its state, where it runs (slot or job, and node), attempts, time and log, then a count of
    each state."""
    try:
        board: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["stages"]
        updated = float(json.loads(path.read_text(encoding="utf-8"))["updated"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ConfigError(
            f"{path}: no readable executor status ({type(e).__name__}); it is written by "
            "`polymnesia run --executor local` or `--executor slurm`"
        ) from None
    now = time.time() if now is None else now
    rows = [("stage", "state", "where", "node", "attempts", "time", "log")]
    order = json.loads(path.read_text(encoding="utf-8")).get("order") or list(board)
    for name in order:
        b = board[name]
        if "ended" in b:
            took = f"{b.get('seconds', b['ended'] - b.get('submitted', b['ended'])):.1f} s"
        elif "submitted" in b and b["state"] in ("queued", "running"):
            since = b.get("started", b["submitted"])
            took = f"{now - since:.0f} s {'running' if 'started' in b else 'queued'}"
        else:
            took = ""
        rows.append(
            (
                name,
                str(b.get("state", "?")),
                str(b.get("where", "")),
                str(b.get("node", "")),
                str(b.get("attempts", 0) or ""),
                took,
                str(b.get("log", "")),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[-1] for r in rows
    ]
    counts = {s: sum(1 for b in board.values() if b.get("state") == s) for s in STATES}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    lines.append(f"{len(board)} stages: {summary}; status written {now - updated:.0f} s ago")
    return "\n".join(line.rstrip() for line in lines)

"""``--executor slurm``: each group of ready stages becomes a SLURM job, submitted through
submitit once the stages it needs are complete.

The driver (``polymnesia run CONFIG --executor slurm``, on a login node or in a job of its own)
walks the stage graph as the local executor does (:func:`~polymnesia.pipeline.executors.run_graph`):
a stage is submitted when every stage it takes inputs from is complete, a chain of stages that
nothing else waits for is one job, and up to ``cluster.batch`` ready evaluation and analysis
stages share one job, so that many short evaluations pay one queue wait. A job runs
``polymnesia run CONFIG --stage a,b`` (the child of the local executor) in submitit's job
process (:func:`polymnesia.jobs.run_stage_job`: one Python start-up), with the driver's
environment (``sbatch`` exports it), so the stage cache (``$POLYMNESIA_CACHE``) and the run
folder must be on a file system that every node sees. Its output goes to
``RUN_DIR/logs/slurm/FIRST_STAGE/JOBID_0_log.out``.

The driver learns a job's end from submitit's result file and its state from ``squeue`` (which
needs no accounting database), never from ``sacct``. A job that fails, is cancelled, preempted
or runs out of its time limit is submitted again, from its first stage that is not complete,
up to ``cluster.attempts`` times; a training stage resumes from its last checkpoint.

A driver that dies without Ctrl-C leaves its jobs running. Each job's id and submitit folder
are in the status file (``RUN_DIR/logs/executor.json``); a driver started again on the run
waits on each job ``squeue`` still has queued or running (:meth:`SlurmLauncher.attach`)
instead of submitting its stages again.

The cluster settings are the config's ``cluster:`` section (:class:`ClusterConfig`), also set
by overrides (``cluster.partition=gpu``). They say where the stages run, not what they
compute: they are left out of the config's hash, its fingerprints and its run folder, so a
run on SLURM has the run folder of the inline run.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.jobs import run_stage_job
from polymnesia.pipeline.cluster import ClusterConfig
from polymnesia.pipeline.executors import Group, LocalResult, Started, chain, run_graph
from polymnesia.pipeline.runner import PlannedStage
from polymnesia.pipeline.stage import STAGES

#: stage categories whose ready stages may share a job (short, and many of them)
SMALL = ("evaluation", "analysis")
#: SLURM job states (``squeue %T``) of a job that waits and of one that runs
QUEUED = frozenset(
    {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD"}
)
RUNNING = frozenset(
    {"RUNNING", "COMPLETING", "STAGE_OUT", "SIGNALING", "RESIZING", "SUSPENDED", "STOPPED"}
)
#: how long a job that left the queue may take to show its result file (shared file systems)
GRACE = 30.0


def _submitit() -> Any:
    try:
        import submitit
    except ImportError:
        raise ConfigError(
            "--executor slurm needs submitit, which is not installed: "
            "pip install 'polymnesia[cluster]'"
        ) from None
    return submitit


def _ask(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ConfigError(f"--executor slurm: `{shlex.join(argv)}` failed: {e}") from None


def check_slurm(cluster: ClusterConfig) -> None:
    """One line, before anything is submitted, for what would stop every job: no submitit, no
    SLURM commands on this machine, a controller that does not answer, a partition that does
    not exist."""
    _submitit()
    missing = [c for c in ("sbatch", "squeue", "scontrol", "scancel") if not shutil.which(c)]
    if missing:
        raise ConfigError(
            f"--executor slurm: no `{missing[0]}` on this machine's PATH (SLURM's commands); "
            "run the driver where jobs can be submitted (a login node), or use "
            "--executor local"
        )
    if cluster.partition is None:
        out = _ask(["sinfo", "-h", "-o", "%P"])
        if out.returncode:
            raise ConfigError(f"--executor slurm: SLURM does not answer: {_first(out)}")
        return
    out = _ask(["scontrol", "show", "partition", "-o", cluster.partition])
    if out.returncode == 0 and out.stdout.strip():
        return
    names = _ask(["sinfo", "-h", "-o", "%R"])
    if names.returncode:
        raise ConfigError(f"--executor slurm: SLURM does not answer: {_first(names)}")
    known = sorted(set(names.stdout.split()))
    raise ConfigError(
        f"cluster.partition {cluster.partition!r} is not a partition of this cluster; "
        f"accepted: {', '.join(known) or '(none)'}"
    )


def _first(out: subprocess.CompletedProcess[str]) -> str:
    lines = (out.stderr or out.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit status {out.returncode}"


def job_shape(gpus: int, cluster: ClusterConfig) -> tuple[int, int]:
    """Nodes and GPUs per node of a job that needs ``gpus`` GPUs: as few nodes as hold them
    (``cluster.gpus_per_node`` each), the GPUs spread evenly over them (rounded up)."""
    if gpus <= 0:
        return 1, 0
    nodes = -(-gpus // cluster.gpus_per_node)
    return nodes, -(-gpus // nodes)


def _parameters(cluster: ClusterConfig, name: str, gpus: int | None = None) -> dict[str, Any]:
    """submitit's ``SlurmExecutor`` parameters for a job named ``name``; ``gpus``: the GPUs
    the memory planner gave its stages (None: ``cluster.gpus_per_job``)."""
    extra = {k: (True if v == "" else v) for k, v in cluster.sbatch.items()}
    params: dict[str, Any] = {
        "job_name": f"polymnesia-{name}"[:128],
        "time": cluster.time_min,
        "cpus_per_task": cluster.cpus_per_job,
        "stderr_to_stdout": True,
        "setup": list(cluster.setup),
        "additional_parameters": extra,
    }
    if gpus is None and cluster.gpus_per_job:
        params["gpus_per_node"] = cluster.gpus_per_job
    elif gpus:
        nodes, per_node = job_shape(gpus, cluster)
        params.update(gpus_per_node=per_node, nodes=nodes, ntasks_per_node=1)
    if cluster.mem_gb is not None:
        params["mem"] = f"{max(1, round(cluster.mem_gb * 1024))}M"
    for key in ("partition", "account", "qos", "constraint"):
        if getattr(cluster, key) is not None:
            params[key] = getattr(cluster, key)
    return params


class SlurmLauncher:
    """Groups of stages as SLURM jobs (:class:`~polymnesia.pipeline.executors.Launcher`)."""

    verb = "submit"

    def __init__(
        self,
        command: Callable[[list[str]], list[str]],
        folder: Path,
        cluster: ClusterConfig,
        gpus: Mapping[str, int] | None = None,
    ) -> None:
        self.command, self.folder, self.cluster = command, folder, cluster
        self.gpus = gpus  # stage -> GPUs from the memory planner (None: cluster.gpus_per_job)
        self.gone: dict[str, float] = {}  # job id -> when it was first seen out of the queue

    def start(self, stages: list[str], slot: int) -> Started:
        submitit = _submitit()
        executor = submitit.SlurmExecutor(folder=self.folder / stages[0], max_num_timeout=0)
        gpus = None if self.gpus is None else max(self.gpus.get(s, 1) for s in stages)
        executor.update_parameters(**_parameters(self.cluster, stages[0], gpus))
        per_node = job_shape(gpus, self.cluster)[1] if gpus else 1
        try:
            job = executor.submit(run_stage_job, self.command(stages), per_node)
        except Exception as e:  # submitit raises its own error with sbatch's output
            message = str(e).strip().splitlines()
            raise PolymnesiaError(
                f"sbatch refused the job of {stages[0]}: {message[-1] if message else e}"
            ) from None
        attach = {"job": str(job.job_id), "folder": str(self.folder / stages[0])}
        where = f"job {job.job_id}" + (f", {gpus} GPU(s)" if gpus else "")
        return Started(job, Path(job.paths.stdout), where, attach=attach)

    def attach(self, stages: list[str], record: dict[str, str]) -> Started | None:
        """The job a previous driver submitted for ``stages`` (``record``: its id and submitit
        folder), when ``squeue`` still has it queued or running; None otherwise (it ended:
        what it built is complete, the rest is submitted again)."""
        job_id, folder = str(record.get("job", "")), Path(str(record.get("folder", "")))
        if not job_id.isdigit() or not folder.is_dir():
            return None
        state, node = self._states([job_id]).get(job_id, ("", ""))
        if state not in QUEUED | RUNNING:
            return None
        job = _submitit().SlurmJob(folder=folder, job_id=job_id)
        where = f"job {job_id}"
        return Started(job, Path(job.paths.stdout), where, node=node, attach=dict(record))

    def _states(self, ids: list[str]) -> dict[str, tuple[str, str]]:
        """``squeue``'s state and node list of each job it still knows (finished ones for a
        while)."""
        out = _ask(["squeue", "-h", "-t", "all", "-j", ",".join(ids), "-o", "%i|%T|%N"])
        if out.returncode and len(ids) > 1:  # a job it forgot makes the whole call fail
            found: dict[str, tuple[str, str]] = {}
            for i in ids:
                found.update(self._states([i]))
            return found
        rows = (line.split("|") for line in out.stdout.splitlines() if line.count("|") == 2)
        return {i.strip(): (s.strip(), n.strip()) for i, s, n in rows}

    def poll(self, running: dict[str, Started]) -> dict[str, tuple[str, int | None]]:
        if not running:
            return {}
        submitit = _submitit()
        states = self._states([s.handle.job_id for s in running.values()])
        out: dict[str, tuple[str, int | None]] = {}
        for name, s in running.items():
            job = s.handle
            result = _result(submitit, Path(job.paths.result_pickle))
            state, node = states.get(job.job_id, ("", ""))
            s.node = node or s.node
            if result == "success":
                out[name] = ("ended", 0)
            elif result is not None:  # failed: say how once SLURM has the job's end
                seen = self.gone.setdefault(job.job_id, time.monotonic())
                if state in RUNNING and time.monotonic() - seen < GRACE:
                    out[name] = ("running", None)
                else:
                    s.note = state if state and state not in RUNNING else "FAILED"
                    out[name] = ("ended", 1)
            elif state in QUEUED:
                out[name] = ("queued", None)
            elif state in RUNNING:
                out[name] = ("running", None)
            else:  # out of the queue without a result: give a shared file system a moment
                seen = self.gone.setdefault(job.job_id, time.monotonic())
                if state == "COMPLETED" and time.monotonic() - seen < GRACE:
                    out[name] = ("running", None)
                else:
                    s.note = state or "gone from the queue"
                    out[name] = ("ended", 1)
        return out

    def stop(self, running: list[Started]) -> None:
        ids = [s.handle.job_id for s in running]
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, timeout=60, check=False)


def _result(submitit: Any, path: Path) -> str | None:
    """``success`` or ``error`` from a job's result file, None while there is none."""
    if not path.is_file():
        return None
    try:
        outcome = submitit.core.utils.pickle_load(path)
    except Exception:  # written by an atomic rename: a partial file is another writer's
        return None
    return str(outcome[0])


def batches(planned: Sequence[PlannedStage], size: int) -> Group:
    """:func:`~polymnesia.pipeline.executors.chain`, and when the chain holds only evaluation
    and analysis stages, more ready chains of such stages, up to ``size`` stages, in pipeline
    order: one job and one queue wait for many short stages."""
    order = {p.spec.name: i for i, p in enumerate(planned)}
    small = {p.spec.name for p in planned if STAGES.get(p.spec.kind).category in SMALL}

    def group(
        first: str, graph: dict[str, set[str]], pending: Sequence[str], done: set[str]
    ) -> list[str]:
        out = chain(first, graph, pending, done)
        if size <= 1 or not set(out) <= small:
            return out
        for name in pending:
            if len(out) >= size:
                break
            if name in out or name not in small or not graph[name] <= done:
                continue
            more = chain(name, graph, [n for n in pending if n not in out], done)
            if set(more) <= small and len(out) + len(more) <= size:
                out += more
        return sorted(out, key=order.__getitem__)

    return group


def run_slurm(
    planned: Sequence[PlannedStage],
    command: Callable[[list[str]], list[str]],
    folder: Path,
    cluster: ClusterConfig,
    *,
    jobs: int = 256,
    log: Callable[[str], None] = print,
    status: Path | None = None,
    gpus: Mapping[str, int] | None = None,
) -> LocalResult:
    """Build every stage of ``planned`` that is not reused as SLURM jobs, at most ``jobs``
    submitted at once, each ``command(stages)`` (see the module's docstring); submitit's files
    and each job's log under ``folder/FIRST_STAGE/``. ``gpus``: each stage's GPUs from the
    memory planner (:func:`polymnesia.experiments.planning.stage_gpus`; a job gets the most of
    its stages'); without it every job gets ``cluster.gpus_per_job``."""
    folder.mkdir(parents=True, exist_ok=True)
    return run_graph(
        planned,
        SlurmLauncher(command, folder, cluster, gpus),
        jobs,
        log=log,
        group=batches(planned, cluster.batch),
        attempts=cluster.attempts,
        status=status,
        poll=cluster.poll_s,
    )


__all__ = [
    "ClusterConfig",
    "SlurmLauncher",
    "batches",
    "check_slurm",
    "run_slurm",
]

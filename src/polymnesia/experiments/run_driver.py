"""What ``polymnesia run`` and ``polymnesia sweep`` do around the executors, shared by both:
a child's build of some stages, the stages that children or SLURM jobs built recorded in the
run folder, a partial report after stages failed for good, the GPUs of each SLURM job from
the memory planner, and a run's closing summary. The command line parses and prints; this
module does the work (and loads torch, which the command line's first answers must not)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from polymnesia.errors import ConfigError
from polymnesia.experiments.planning import stage_gpus
from polymnesia.experiments.preflight import check_remote_code
from polymnesia.pipeline import runner
from polymnesia.pipeline.partial import arm_of, partial_plan, write_missing
from polymnesia.pipeline.run_dir import forget_stages, update_run_record
from polymnesia.pipeline.runner import plan
from polymnesia.training.memory_fit import skip_memory_checks
from polymnesia.training.progress import duration

Log = Callable[[str], None]


def one_stage(specs: list[Any], names: str) -> list[Any]:
    """The stages ``names`` (comma-separated) and every stage they need, in pipeline order
    (so with the pipeline's fingerprints)."""
    by_name = {s.name: s for s in specs}
    wanted = names.split(",")
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise ConfigError(f"--stage {unknown[0]!r} is not a stage of this config")
    keep: set[str] = set()
    todo = list(wanted)
    while todo:
        n = todo.pop()
        if n not in keep:
            keep.add(n)
            todo.extend(by_name[n].inputs.values())
    return [s for s in specs if s.name in keep]


def build_child(
    cfg: Any,
    specs: list[Any],
    stages: str,
    *,
    trust_remote_code: bool,
    no_memory_check: bool,
    lock_timeout: float,
    log: Log,
) -> None:
    """A child of ``--executor local`` or ``slurm``: build the stages ``stages`` (and reuse
    what they need), nothing else; the driver checked the config and owns the run folder."""
    check_remote_code(cfg, trust_remote_code)
    if no_memory_check:
        skip_memory_checks()
    runner.run_pipeline(one_stage(specs, stages), None, log=log, lock_timeout=lock_timeout)


def record_children(run_dir: Path, planned: list[Any], done: Any, executor: str) -> None:
    """In ``run.json``, the stages that ``--executor local`` children or ``slurm`` jobs built,
    as built (the inline pass that wrote the run folder found them complete)."""
    for p in planned:
        name = p.spec.name
        if name in done.built:
            record = {
                "kind": p.spec.kind,
                "fingerprint": p.fingerprint,
                "status": p.status,
                "entry": str(p.entry),
                "executor": executor,
                "seconds": done.seconds[name],
                "log": str(done.logs[name]),
                **p.spec.seed_record(),
            }
            if executor == "slurm":
                record["job"] = done.where[name].removeprefix("job ")
                record["attempts"] = done.attempts[name]
            update_run_record(run_dir, name, record)


def partial_report(
    exp: Any,
    cfg: Any,
    specs: list[Any],
    planned: list[Any],
    done: Any,
    run_dir: Path,
    *,
    executor: str,
    lock_timeout: float,
    log: Log,
) -> str:
    """After stages failed for good: the run folder and the report from the stages that
    completed, without the arms that lost a stage (:mod:`polymnesia.pipeline.partial`);
    the words the error line says about it."""
    complete = {p.spec.name for p in plan(specs) if p.status == "reuse"}
    partial = partial_plan(planned, done.failed, complete)
    kept = set(partial.kept)
    missing = f"missing arms: {', '.join(partial.arms) or '(none)'}"
    if not any(arm_of(s) for s in specs if s.name in kept):
        return f"no report ({missing}: no arm finished); "
    forget_stages(run_dir, list(partial.stages))  # recorded by an earlier run, if any
    kept_specs = [s for s in specs if s.name in kept]
    runner.run_pipeline(kept_specs, run_dir, log=log, lock_timeout=lock_timeout)
    record_children(run_dir, [p for p in planned if p.spec.name in kept], done, executor)
    write_missing(run_dir, partial)
    try:
        report = exp.report(cfg, run_dir)
    except Exception as e:  # the protocol's report cannot stand without a missing arm
        reason = str(e).strip().splitlines()
        return (
            f"no report ({missing}; the {cfg.experiment} report needs them: "
            f"{type(e).__name__}: {reason[-1] if reason else ''}); "
        )
    return f"report of the other arms: {report} ({missing}); "


def cluster_gpus(cfg: Any, specs: list[Any], planned: list[Any]) -> dict[str, int] | None:
    """Each stage's GPUs for ``--executor slurm`` from the memory planner, when the config's
    ``cluster.gpu_memory_gb`` is set (None: every job gets ``cluster.gpus_per_job``)."""
    cluster = cfg.cluster
    if cluster.gpu_memory_gb is None:
        return None
    return stage_gpus(
        specs,
        {p.spec.name for p in planned if p.status != "reuse"},
        gpu_bytes=int(cluster.gpu_memory_gb * 2**30),
        gpus_per_node=cluster.gpus_per_node,
        max_nodes=cluster.max_nodes,
    )


def gpu_count() -> int:
    """The GPUs this process sees (0 without CUDA)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def run_summary(run_dir: Path, seconds: float) -> str:
    """``40 stages in 32 s: 39 built (2 resumed), 1 reused from the cache`` from ``run.json``
    (every stage's status as this run left it)."""
    stages = json.loads((run_dir / "run.json").read_text(encoding="utf-8")).get("stages", {})
    status = Counter(str(v.get("status")) for v in stages.values())
    built = status["run"] + status["resume"]
    resumed = f" ({status['resume']} resumed)" if status["resume"] else ""
    return (
        f"{len(stages)} stage{'' if len(stages) == 1 else 's'} in {duration(seconds)}: {built} "
        f"built{resumed}, {status['reuse']} reused from the cache"
    )

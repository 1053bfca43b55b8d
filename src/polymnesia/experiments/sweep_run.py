"""``polymnesia sweep``'s work: check every point as ``run`` checks a config, join the points'
stage plans, hand them to an executor (or run them inline), write each point's run folder and
report, and compare the runs (``OUT/compare.md``). The expansion and its checks are
:mod:`polymnesia.experiments.sweep`; the command line (:mod:`polymnesia.cli.sweep`) parses its
arguments, calls :func:`run_sweep` and returns its exit status."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.experiments.base import EXPERIMENTS
from polymnesia.experiments.model_checks import check_hub_models
from polymnesia.experiments.planning import check_memory
from polymnesia.experiments.preflight import (
    build_specs,
    check_harness_names,
    check_remote_code,
    check_run_dir_place,
    check_run_record,
    check_settings,
    preflight,
)
from polymnesia.experiments.run_driver import (
    build_child,
    cluster_gpus,
    gpu_count,
    record_children,
    run_summary,
)
from polymnesia.experiments.sweep import (
    MergedPlan,
    Sweep,
    expand,
    load_point,
    load_points,
    merge_plans,
    point_error,
)
from polymnesia.io import atomic_write_json, file_lock
from polymnesia.pipeline import executors, runner, slurm
from polymnesia.pipeline.executors import LocalResult, check_executor
from polymnesia.pipeline.partial import write_missing
from polymnesia.pipeline.run_dir import check_run_dir, prepare_run_dir
from polymnesia.pipeline.runner import describe_plan, plan
from polymnesia.reports.compare import write_comparison
from polymnesia.reports.measured import machine_info
from polymnesia.runtime import partial_state
from polymnesia.training.memory_fit import skip_memory_checks
from polymnesia.training.progress import duration

Log = Callable[[str], None]
#: a child's command line for the joined stages it builds, given the joined plan
ChildCommand = Callable[[MergedPlan], Callable[[list[str]], list[str]]]


class _Point:
    """One point, checked: its config, protocol, stages, plan and run folder."""

    def __init__(self, spot: Any, cfg: Any, exp: Any, specs: list[Any], run_dir: Path) -> None:
        self.spot, self.cfg, self.exp, self.specs, self.run_dir = spot, cfg, exp, specs, run_dir
        self.planned: list[Any] = []


def _point_result(done: Any, names: dict[str, str]) -> LocalResult:
    """The executor's result (by joined stage name) for one point's own stage names."""
    own = LocalResult()
    for name, merged in names.items():
        if merged in done.built:
            own.built.append(name)
        for mine, theirs in (
            (own.logs, done.logs),
            (own.seconds, done.seconds),
            (own.where, done.where),
            (own.attempts, done.attempts),
        ):
            if merged in theirs:
                mine[name] = theirs[merged]
    return own


def _build_point(
    sweep: Sweep,
    point: int,
    stages: str,
    *,
    trust_remote_code: bool,
    no_memory_check: bool,
    lock_timeout: float,
    log: Log,
) -> int:
    """``--point N --stage A,B``: build those stages of point N (and reuse what they need)."""
    if not 1 <= point <= len(sweep.points):
        raise ConfigError(f"--point {point}: the sweep has {len(sweep.points)} points")
    cfg = load_point(sweep, sweep.points[point - 1])
    specs = build_specs(EXPERIMENTS.get(cfg.experiment), cfg, sweep.config)
    build_child(
        cfg,
        specs,
        stages,
        trust_remote_code=trust_remote_code,
        no_memory_check=no_memory_check,
        lock_timeout=lock_timeout,
        log=log,
    )
    return 0


def _finish_point(
    point: _Point, trust_remote_code: bool, lock_timeout: float, executor: str, done: Any, log: Log
) -> str:
    """Write one point's run folder and report, reusing what the executor built (or, inline,
    building it); the closing line of the point."""
    run_dir = point.run_dir
    started = time.monotonic()
    extra = {"trust_remote_code": bool(trust_remote_code), "machine": machine_info()}
    prepare_run_dir(run_dir, point.cfg, extra=extra)
    with file_lock(run_dir / ".lock", f"run folder {run_dir}"):
        runner.run_pipeline(point.specs, run_dir, log=log, lock_timeout=lock_timeout)
        if done is not None:
            record_children(run_dir, point.planned, done, executor)
        write_missing(run_dir, None)
        report = point.exp.report(point.cfg, run_dir)
    return f"{run_summary(run_dir, time.monotonic() - started)}; report: {report}"


def _check_points(
    sweep: Sweep, cfgs: list[Any], out: Path, trust_remote_code: bool, dry_run: bool
) -> list[_Point]:
    """What ``run`` checks before anything runs, for every point (one line naming the point)."""
    points = []
    for spot, cfg in zip(sweep.points, cfgs, strict=True):
        try:
            exp = EXPERIMENTS.get(cfg.experiment)
            specs = build_specs(exp, cfg, sweep.config)
            check_settings(cfg, specs, sweep.config)
            check_remote_code(cfg, trust_remote_code)
            run_dir = out / spot.label
            check_run_dir_place(run_dir)
            check_run_record(run_dir)
            check_run_dir(run_dir, cfg)
            if dry_run:
                check_harness_names(specs)
        except PolymnesiaError as e:
            raise point_error(spot, e) from None
        points.append(_Point(spot, cfg, exp, specs, run_dir))
    return points


def _dry_run_lines(sweep: Sweep, points: list[_Point], merged: MergedPlan, out: Path) -> str:
    """What ``sweep --dry-run`` prints: the points, the joined stage plan and what it builds."""
    keys = ", ".join(f"{k} ({len(v)})" for k, v in sweep.values.items())
    lines = [f"# sweep of {sweep.config}: {len(points)} point(s) over {keys}"]
    if sweep.fixed:
        lines.append(f"# fixed in every point: {' '.join(sweep.fixed)}")
    for p in points:
        todo = sum(1 for s in p.planned if s.status != "reuse")
        lines.append(
            f"#   {p.spot.number}. {p.run_dir}: {' '.join(p.spot.overrides[len(sweep.fixed) :])} "
            f"({len(p.planned)} stages, {todo} not in the cache)"
        )
    lines.append("\n# the points' stages joined (reuse = cached, resume = interrupted, run = new):")
    lines.append(describe_plan(merged.planned))
    build = sum(1 for s in merged.planned if s.status != "reuse")
    shared = merged.shared()
    lines.append(
        f"# {len(merged.planned)} distinct stages: {build} to build, "
        f"{len(merged.planned) - build} to reuse from the cache; {len(shared)} shared by "
        f"several points (each built once)" + (f": {', '.join(shared)}" if shared else "")
    )
    lines.append(f"# sweep folder: {out} (compare.md across the points' runs)")
    lines.extend(f"# note: {note}" for note in sweep.notes)
    return "\n".join(lines)


def run_sweep(
    config: str,
    overrides: list[str],
    *,
    out: str | None,
    executor: str,
    jobs: int | None,
    dry_run: bool,
    trust_remote_code: bool,
    no_memory_check: bool,
    lock_timeout: float,
    child_command: ChildCommand,
    log: Log,
    point: int | None = None,
    stage: str | None = None,
) -> int:
    """``polymnesia sweep``: the exit status (1: stages failed for good); ``stage`` (with
    ``point``): a child that builds those stages of that point, nothing else."""
    check_executor(executor, jobs)
    sweep = expand(config, overrides)
    if stage:
        return _build_point(
            sweep,
            point or 0,
            stage,
            trust_remote_code=trust_remote_code,
            no_memory_check=no_memory_check,
            lock_timeout=lock_timeout,
            log=log,
        )
    if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        raise ConfigError(
            "polymnesia sweep runs in one process, not under torchrun or accelerate launch; "
            "a stage of several devices runs as under `run --executor slurm` (docs/sweeps.md)"
        )
    if executor == "slurm" and any(k.split(".")[0] == "cluster" for k in sweep.values):
        raise ConfigError(
            "a sweep through --executor slurm submits every point's jobs with one cluster: "
            "section; fix cluster.* keys (key=value), do not sweep them"
        )
    cfgs = load_points(sweep)
    folder = Path(out) if out else Path("runs") / f"sweep-{cfgs[0].name}-{sweep.digest()[:8]}"
    if folder.exists() and not folder.is_dir():
        raise PolymnesiaError(f"--out {folder} is a file; name a folder for the sweep's runs")
    points = _check_points(sweep, cfgs, folder, trust_remote_code, dry_run)
    if executor == "slurm":
        slurm.check_slurm(points[0].cfg.cluster)
    for p in points:
        p.planned = plan(p.specs)
        to_run = {s.spec.name for s in p.planned if s.status != "reuse"}
        try:
            check_hub_models(p.cfg, p.specs, to_run, sweep.config)
        except ConfigError as e:
            raise point_error(p.spot, e) from None
    merged = merge_plans([p.planned for p in points])
    gpus: dict[str, int] | None = None
    if executor == "slurm":
        for i, p in enumerate(points):
            own = cluster_gpus(p.cfg, p.specs, p.planned)
            if own is not None:
                gpus = (gpus or {}) | {merged.names[i][n]: k for n, k in own.items()}
    if dry_run:
        log(_dry_run_lines(sweep, points, merged, folder))
        return 0
    return _run_points(
        sweep,
        points,
        merged,
        folder,
        executor=executor,
        jobs=jobs,
        gpus=gpus,
        trust_remote_code=trust_remote_code,
        no_memory_check=no_memory_check,
        lock_timeout=lock_timeout,
        child_command=child_command,
        log=log,
    )


def _run_points(
    sweep: Sweep,
    points: list[_Point],
    merged: MergedPlan,
    out: Path,
    *,
    executor: str,
    jobs: int | None,
    gpus: dict[str, int] | None,
    trust_remote_code: bool,
    no_memory_check: bool,
    lock_timeout: float,
    child_command: ChildCommand,
    log: Log,
) -> int:
    """The checked points run: the preflight of each, then the executor, each point's run
    folder and report, ``compare.md`` and the closing lines."""
    state = partial_state()
    for p in points:
        try:
            preflight(p.cfg, state.device.type, sweep.config, p.specs)
            if not no_memory_check and gpus is None:
                to_run = {s.spec.name for s in p.planned if s.status != "reuse"}
                check_memory(p.specs, to_run, state, sweep.config)
        except ConfigError as e:
            raise point_error(p.spot, e) from None
    if no_memory_check or gpus is not None:
        skip_memory_checks()
    for note in sweep.notes:
        log(f"[polymnesia] note: {note}")
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "config": sweep.config,
        "sweep": sweep.values,
        "fixed": sweep.fixed,
        "executor": executor,
        "points": [
            {
                "number": p.spot.number,
                "label": p.spot.label,
                "values": p.spot.values,
                "overrides": p.spot.overrides,
                "run_dir": str(p.run_dir),
            }
            for p in points
        ],
    }
    atomic_write_json(out / "sweep.json", record)
    started = time.monotonic()
    with file_lock(out / ".lock", f"sweep folder {out}"):
        done = None
        if executor == "local":
            n_gpus = gpu_count()
            done = executors.run_local(  # looked up here: a test stands in for it
                merged.planned,
                child_command(merged),
                out / "logs",
                jobs or (n_gpus or 2),
                log=log,
                gpus=n_gpus,
                status=out / "logs" / "executor.json",
            )
        elif executor == "slurm":
            done = slurm.run_slurm(
                merged.planned,
                child_command(merged),
                out / "logs" / "slurm",
                points[0].cfg.cluster,
                jobs=jobs or 256,
                log=log,
                status=out / "logs" / "executor.json",
                gpus=gpus,
            )
        lost = set(done.failed) | set(done.held_back) if done is not None else set()
        finished, missing = [], []
        for i, p in enumerate(points):
            if lost & set(merged.names[i].values()):
                missing.append(p)
                continue
            own = _point_result(done, merged.names[i]) if done is not None else None
            line = _finish_point(p, trust_remote_code, lock_timeout, executor, own, log)
            log(f"[polymnesia] point {p.spot.number} ({p.spot.label}): {line}")
            finished.append(p)
        comparison = ""
        if len(finished) >= 2:
            md, _page = write_comparison([p.run_dir for p in finished], out)
            comparison = f"; comparison: {md}"
    build = [s.spec.name for s in merged.planned if s.status != "reuse"]
    log(
        f"[polymnesia] sweep of {len(points)} point(s) in {duration(time.monotonic() - started)}: "
        f"{len(merged.planned)} distinct stages, {len(build)} built, "
        f"{len(merged.planned) - len(build)} reused from the cache, {len(merged.shared())} "
        f"shared by several points{comparison}"
    )
    if done is not None and not done.ok:
        failed = ", ".join(f"{n} (log {path})" for n, path in done.failed.items())
        names = ", ".join(f"{p.spot.number} ({p.spot.label})" for p in missing)
        log(
            f"[polymnesia] error: {len(done.failed)} stage(s) failed: {failed}; points not "
            f"finished: {names}; the stages that finished are cached: run the same command "
            "again to retry the rest"
        )
        return 1
    return 0

"""What ``polymnesia run CONFIG`` does: load and check the config (the checks are
:mod:`polymnesia.experiments.preflight`'s), plan its stages, run them inline or through an
executor, write the run folder and its report (or, after stages failed for good, the
partial report), and say so through ``log``. The command line (:mod:`polymnesia.cli.run`)
parses and calls :func:`run_config`."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import yaml

from polymnesia.experiments import model_checks
from polymnesia.experiments import preflight as checks
from polymnesia.experiments.base import EXPERIMENTS
from polymnesia.experiments.loading import load_config
from polymnesia.experiments.planning import check_memory
from polymnesia.experiments.preflight import (
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
    partial_report,
    record_children,
    run_summary,
)
from polymnesia.io import file_lock
from polymnesia.pipeline import executors, runner, slurm
from polymnesia.pipeline.executors import check_executor
from polymnesia.pipeline.partial import write_missing
from polymnesia.pipeline.run_dir import check_run_dir, default_run_dir, prepare_run_dir
from polymnesia.pipeline.runner import (
    describe_plan,
    parse_roles,
    plan,
    select_stages,
)
from polymnesia.reports.measured import machine_info
from polymnesia.runtime import partial_state
from polymnesia.training.memory_fit import skip_memory_checks

Log = Callable[[str], None]


def run_config(
    config: str,
    overrides: list[str],
    *,
    out: str | None,
    dry_run: bool,
    trust_remote_code: bool,
    lock_timeout: float,
    only: str | None,
    no_memory_check: bool,
    executor: str,
    jobs: int | None,
    child_command: Callable[[list[str]], list[str]],
    log: Log,
    stage: str | None = None,
) -> int:
    """``polymnesia run``: the exit status (1: stages failed for good under an executor);
    ``stage``: a child of ``--executor local`` or ``slurm`` that builds those stages. The
    checks, executors and Hub checks are looked up on their modules (tests stand in for
    them). ``out``: the run folder (default ``runs/NAME-CONFIGHASH``)."""
    check_executor(executor, jobs)
    categories = parse_roles(only) if only else None
    cfg = load_config(config, overrides)
    exp = EXPERIMENTS.get(cfg.experiment)
    specs = checks.build_specs(exp, cfg, config)
    if stage:  # a child of --executor local: the driver checked and owns the run folder
        build_child(
            cfg,
            specs,
            stage,
            trust_remote_code=trust_remote_code,
            no_memory_check=no_memory_check,
            lock_timeout=lock_timeout,
            log=log,
        )
        return 0
    n_all, skipped = len(specs), list[str]()
    if categories:
        complete = {p.spec.name for p in plan(specs) if p.status == "reuse"}
        specs, skipped = select_stages(specs, categories, complete)
    check_settings(cfg, specs, config)
    check_remote_code(cfg, trust_remote_code)
    run_dir = Path(out) if out else default_run_dir(cfg)
    check_run_dir_place(run_dir)
    check_run_record(run_dir)
    if executor == "slurm":  # no sbatch, no controller, no such partition: before all
        slurm.check_slurm(cfg.cluster)
    planned = plan(specs)
    model_checks.check_hub_models(
        cfg, specs, {p.spec.name for p in planned if p.status != "reuse"}, config
    )
    gpus = cluster_gpus(cfg, specs, planned) if executor == "slurm" else None
    if dry_run:
        check_run_dir(run_dir, cfg)  # what the run would refuse, the dry run refuses too
        checks.check_harness_names(specs)  # `run` checks them in its preflight, validate too
        log(
            yaml.safe_dump(
                cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True
            ).rstrip()
        )
        log(
            f"\n# run folder: {run_dir}\n# stages (reuse = cached, resume = interrupted, run = "
            "new):"
        )
        log(describe_plan(planned))
        if gpus:
            sized = ", ".join(f"{name} {n}" for name, n in gpus.items() if n != 1)
            log(
                f"# slurm jobs sized by the memory planner for GPUs of "
                f"{cfg.cluster.gpu_memory_gb:g} GiB: 1 GPU each"
                + (f", except (GPUs): {sized}" if sized else "")
            )
        if skipped:
            log("# skipped by --only (they need stages of other categories): " + ", ".join(skipped))
        return 0
    state = partial_state()
    if categories is None or set(categories) - {"data"}:  # `--only data` runs no model
        preflight(cfg, state.device.type, config, specs)
        if not no_memory_check and gpus is None:  # sized for the cluster's GPUs: above
            to_run = {p.spec.name for p in planned if p.status != "reuse"}
            check_memory(specs, to_run, state, config)
        else:
            skip_memory_checks()  # the training loop's own check before its first step too
    if state.is_main_process:
        # the machine each run ran on, for its measured-run record (docs/reports.md)
        extra = {"trust_remote_code": bool(trust_remote_code), "machine": machine_info()}
        prepare_run_dir(run_dir, cfg, extra=extra)
        if trust_remote_code:
            log("[polymnesia] trust_remote_code is ON for this run (recorded in run.json)")
        lock = file_lock(run_dir / ".lock", f"run folder {run_dir}")
        lock.__enter__()
    state.wait_for_everyone()
    started = time.monotonic()
    try:
        if executor == "local" and state.is_main_process:
            n_gpus = gpu_count()
            jobs = jobs or (n_gpus or 2)
            planned = plan(specs)
            done = executors.run_local(
                planned,
                child_command,
                run_dir / "logs",
                jobs,
                log=log,
                gpus=n_gpus,
                status=run_dir / "logs" / "executor.json",
            )
        elif executor == "slurm" and state.is_main_process:
            planned = plan(specs)
            done = slurm.run_slurm(
                planned,
                child_command,
                run_dir / "logs" / "slurm",
                cfg.cluster,
                jobs=jobs or 256,
                log=log,
                status=run_dir / "logs" / "executor.json",
                gpus=gpus,
            )
        if executor != "inline" and state.is_main_process and not done.ok:
            failed = ", ".join(f"{n} (log {p})" for n, p in done.failed.items())
            held = f"; not run: {', '.join(done.held_back)}" if done.held_back else ""
            partial = (
                ""
                if categories
                else partial_report(
                    exp,
                    cfg,
                    specs,
                    planned,
                    done,
                    run_dir,
                    executor=executor,
                    lock_timeout=lock_timeout,
                    log=log,
                )
            )
            log(
                f"[polymnesia] error: {len(done.failed)} stage(s) failed: {failed}{held}; "
                f"{partial}the stages that finished are cached: run the same command again to "
                "retry the rest",
            )
            return 1
        runner.run_pipeline(
            specs,
            run_dir,
            log=log,
            lock_timeout=lock_timeout,
        )
        if executor != "inline" and state.is_main_process:
            record_children(run_dir, planned, done, executor)
        if state.is_main_process and not categories:
            write_missing(run_dir, None)  # every stage is complete: the report is whole
        if state.is_main_process and categories:
            if skipped:
                log(
                    f"[polymnesia] skipped {len(skipped)} {'/'.join(categories)} stage(s) that "
                    f"need stages of other categories first: {', '.join(skipped)}"
                )
            log(
                f"[polymnesia] ran the {', '.join(categories)} stages and what they need "
                f"({len(specs)} of {n_all}); no report: `polymnesia run` with the same config "
                "runs the rest (reusing these) and writes it"
            )
        elif state.is_main_process:
            report = exp.report(cfg, run_dir)
            log(f"[polymnesia] {run_summary(run_dir, time.monotonic() - started)}")
            log(f"[polymnesia] report: {report}")
    finally:
        if state.is_main_process:
            lock.__exit__(None, None, None)
    return 0

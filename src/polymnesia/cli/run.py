"""``polymnesia run CONFIG``: run an experiment's stages through the cache, then its report.

The checks before anything trains live in :mod:`polymnesia.experiments.preflight` (shared
with ``validate``, ``plan`` and the tests); this module parses, calls them in order and
prints. ``--only CATEGORIES`` runs the stages of some stage categories (data, training,
evaluation, analysis, other) and what they need."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from polymnesia.cli.argtypes import amount


def build_specs(exp: Any, cfg: Any, source: str) -> list[Any]:
    """:func:`polymnesia.experiments.preflight.build_specs` (imported when first called)."""
    from polymnesia.experiments.preflight import build_specs as build

    return build(exp, cfg, source)


def _default_lock_timeout() -> float:
    try:
        return float(os.environ.get("POLYMNESIA_LOCK_TIMEOUT", 86400))
    except ValueError:
        return 86400.0


def add_parser(sub: Any) -> None:
    r = sub.add_parser("run", help="run an experiment config")
    r.add_argument("config")
    r.add_argument("overrides", nargs="*", help="key.path=value overrides")
    r.add_argument("--run-dir", help="run folder (default runs/NAME-CONFIGHASH)")
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="print the resolved config and the stage plan, run nothing",
    )
    r.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow models, tokenizers and datasets to run code from their repositories "
        "(this run only)",
    )
    r.add_argument(
        "--lock-timeout",
        type=amount("seconds"),
        default=_default_lock_timeout(),
        metavar="SECONDS",
        help="how long to wait for a cache entry another run is building "
        "(default $POLYMNESIA_LOCK_TIMEOUT or 86400)",
    )
    r.add_argument(
        "--only",
        metavar="CATEGORIES",
        help="run only the stages of these stage categories (comma-separated: data, training, "
        "evaluation, analysis, other; `polymnesia ls stages` shows each stage's) and the "
        "stages they need, and write no report; e.g. --only data on a machine with "
        "internet, then `polymnesia cache export` for one without",
    )
    r.add_argument(
        "--no-memory-check",
        action="store_true",
        help="run training stages that the memory planner (`polymnesia plan`) says will not "
        "fit this machine's memory (available RAM on a CPU, the device's memory on a GPU)",
    )
    r.add_argument(
        "--executor",
        default="inline",
        metavar="NAME",
        help="who runs the stages: inline (default: this process, one after another), "
        "local (independent stages side by side as child processes on this machine, "
        "--jobs at a time) or slurm (each group of ready stages a SLURM job, with the "
        "config's cluster: settings, e.g. cluster.partition=gpu; docs/scale.md)",
    )
    r.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="with --executor local: at most N stages at once (default: the GPU count, else "
        "2); with --executor slurm: at most N jobs submitted at once (default 256)",
    )
    # a child of --executor local: build this stage (and reuse what it needs), nothing else
    r.add_argument("--stage", help=argparse.SUPPRESS)
    r.set_defaults(fn=cmd_run)


def _child_command(args: argparse.Namespace) -> Any:
    """The command line of a ``--executor local`` child that builds one stage."""
    import sys

    def command(stages: list[str]) -> list[str]:
        argv = [sys.executable, "-m", "polymnesia", "run", args.config, *args.overrides]
        argv += ["--stage", ",".join(stages), "--lock-timeout", repr(float(args.lock_timeout))]
        argv += ["--no-memory-check"] if args.no_memory_check else []
        return argv + (["--trust-remote-code"] if args.trust_remote_code else [])

    return command


def cmd_run(args: argparse.Namespace) -> int:
    import yaml

    from polymnesia.experiments import EXPERIMENTS, load_config
    from polymnesia.experiments.model_checks import check_hub_models
    from polymnesia.experiments.preflight import (
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
        partial_report,
        record_children,
        run_summary,
    )
    from polymnesia.io import file_lock
    from polymnesia.pipeline.executors import check_executor, run_local
    from polymnesia.pipeline.run_dir import check_run_dir, default_run_dir, prepare_run_dir
    from polymnesia.pipeline.runner import (
        describe_plan,
        parse_roles,
        plan,
        run_pipeline,
        select_stages,
    )
    from polymnesia.pipeline.slurm import check_slurm, run_slurm
    from polymnesia.runtime import partial_state

    check_executor(args.executor, args.jobs)
    categories = parse_roles(args.only) if args.only else None
    cfg = load_config(args.config, args.overrides)
    exp = EXPERIMENTS.get(cfg.experiment)
    specs = build_specs(exp, cfg, args.config)
    if args.stage:  # a child of --executor local: the driver checked and owns the run folder
        build_child(
            cfg,
            specs,
            args.stage,
            trust_remote_code=args.trust_remote_code,
            no_memory_check=args.no_memory_check,
            lock_timeout=args.lock_timeout,
            log=lambda m: print(m, flush=True),
        )
        return 0
    n_all, skipped = len(specs), list[str]()
    if categories:
        complete = {p.spec.name for p in plan(specs) if p.status == "reuse"}
        specs, skipped = select_stages(specs, categories, complete)
    check_settings(cfg, specs, args.config)
    check_remote_code(cfg, args.trust_remote_code)
    run_dir = Path(args.run_dir) if args.run_dir else default_run_dir(cfg)
    check_run_dir_place(run_dir)
    check_run_record(run_dir)
    if args.executor == "slurm":  # no sbatch, no controller, no such partition: before all
        check_slurm(cfg.cluster)
    planned = plan(specs)
    check_hub_models(cfg, specs, {p.spec.name for p in planned if p.status != "reuse"}, args.config)
    gpus = cluster_gpus(cfg, specs, planned) if args.executor == "slurm" else None
    if args.dry_run:
        check_run_dir(run_dir, cfg)  # what the run would refuse, the dry run refuses too
        check_harness_names(specs)  # `run` checks them in its preflight, validate too
        print(
            yaml.safe_dump(
                cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True
            ).rstrip()
        )
        print(
            f"\n# run folder: {run_dir}\n# stages (reuse = cached, resume = interrupted, run = "
            "new):"
        )
        print(describe_plan(planned))
        if gpus:
            sized = ", ".join(f"{name} {n}" for name, n in gpus.items() if n != 1)
            print(
                f"# slurm jobs sized by the memory planner for GPUs of "
                f"{cfg.cluster.gpu_memory_gb:g} GiB: 1 GPU each"
                + (f", except (GPUs): {sized}" if sized else "")
            )
        if skipped:
            print(
                "# skipped by --only (they need stages of other categories): " + ", ".join(skipped)
            )
        return 0
    state = partial_state()
    if categories is None or set(categories) - {"data"}:  # `--only data` runs no model
        preflight(cfg, state.device.type, args.config, specs)
        if not args.no_memory_check and gpus is None:  # sized for the cluster's GPUs: above
            from polymnesia.experiments.planning import check_memory

            to_run = {p.spec.name for p in planned if p.status != "reuse"}
            check_memory(specs, to_run, state, args.config)
        else:
            from polymnesia.training.memory_fit import skip_memory_checks

            skip_memory_checks()  # the training loop's own check before its first step too
    if state.is_main_process:
        from polymnesia.reports.measured import machine_info

        # the machine each run ran on, for its measured-run record (docs/reports.md)
        extra = {"trust_remote_code": bool(args.trust_remote_code), "machine": machine_info()}
        prepare_run_dir(run_dir, cfg, extra=extra)
        if args.trust_remote_code:
            print("[polymnesia] trust_remote_code is ON for this run (recorded in run.json)")
        lock = file_lock(run_dir / ".lock", f"run folder {run_dir}")
        lock.__enter__()
    state.wait_for_everyone()
    started = time.monotonic()
    try:
        if args.executor == "local" and state.is_main_process:
            n_gpus = gpu_count()
            jobs = args.jobs or (n_gpus or 2)
            planned = plan(specs)
            done = run_local(
                planned,
                _child_command(args),
                run_dir / "logs",
                jobs,
                log=lambda m: print(m, flush=True),
                gpus=n_gpus,
                status=run_dir / "logs" / "executor.json",
            )
        elif args.executor == "slurm" and state.is_main_process:
            planned = plan(specs)
            done = run_slurm(
                planned,
                _child_command(args),
                run_dir / "logs" / "slurm",
                cfg.cluster,
                jobs=args.jobs or 256,
                log=lambda m: print(m, flush=True),
                status=run_dir / "logs" / "executor.json",
                gpus=gpus,
            )
        if args.executor != "inline" and state.is_main_process and not done.ok:
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
                    executor=args.executor,
                    lock_timeout=args.lock_timeout,
                    log=lambda m: print(m, flush=True),
                )
            )
            print(
                f"[polymnesia] error: {len(done.failed)} stage(s) failed: {failed}{held}; "
                f"{partial}the stages that finished are cached: run the same command again to "
                "retry the rest",
                flush=True,
            )
            return 1
        run_pipeline(
            specs,
            run_dir,
            log=lambda m: print(m, flush=True),
            lock_timeout=args.lock_timeout,
        )
        if args.executor != "inline" and state.is_main_process:
            record_children(run_dir, planned, done, args.executor)
        if state.is_main_process and not categories:
            from polymnesia.pipeline.partial import write_missing

            write_missing(run_dir, None)  # every stage is complete: the report is whole
        if state.is_main_process and categories:
            if skipped:
                print(
                    f"[polymnesia] skipped {len(skipped)} {'/'.join(categories)} stage(s) that "
                    f"need stages of other categories first: {', '.join(skipped)}"
                )
            print(
                f"[polymnesia] ran the {', '.join(categories)} stages and what they need "
                f"({len(specs)} of {n_all}); no report: `polymnesia run` with the same config "
                "runs the rest (reusing these) and writes it"
            )
        elif state.is_main_process:
            report = exp.report(cfg, run_dir)
            print(f"[polymnesia] {run_summary(run_dir, time.monotonic() - started)}")
            print(f"[polymnesia] report: {report}")
    finally:
        if state.is_main_process:
            lock.__exit__(None, None, None)
    return 0

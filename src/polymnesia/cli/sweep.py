"""``polymnesia sweep CONFIG key=[a,b] key2=[x,y]``: one run per point of the grid (or of the
config's ``grid:`` section), through one executor, then a ``compare`` table of the runs.

The expansion and its checks are :mod:`polymnesia.experiments.sweep`. Every point is validated
and checked as ``run`` checks a config before anything runs. With ``--executor local`` or
``slurm`` the points' stage graphs are joined into one (a stage several points share is built
once) and handed to the executor, so independent stages of different points run side by
side; with ``inline`` (the default) the points run one after another in this process, each
reusing the stages an earlier point built. Then each point's run folder
(``OUT/KEY=VALUE,...``) and report are written by an inline pass that reuses every entry (so
each is the folder ``polymnesia run CONFIG KEY=VALUE ...`` writes), and ``OUT/compare.md``
puts the runs side by side (:func:`polymnesia.reports.compare.write_comparison`)."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from polymnesia.cli import run as run_cli
from polymnesia.cli.argtypes import amount
from polymnesia.cli.output import run_summary


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "sweep", help="run a config over a grid of values (key=[a,b]), then compare the runs"
    )
    s.add_argument("config")
    s.add_argument(
        "overrides",
        nargs="*",
        help="key.path=[a,b] (swept: one run per value, the product over keys) or "
        "key.path=value (fixed in every run)",
    )
    s.add_argument(
        "--out",
        help="the sweep's folder: a run folder per point and compare.md "
        "(default runs/sweep-NAME-HASH)",
    )
    s.add_argument(
        "--dry-run",
        action="store_true",
        help="print the points and the stages to build and reuse, run nothing",
    )
    s.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow models, tokenizers and datasets to run code from their repositories",
    )
    s.add_argument(
        "--lock-timeout",
        type=amount("seconds"),
        default=run_cli._default_lock_timeout(),
        metavar="SECONDS",
        help="how long to wait for a cache entry another run is building",
    )
    s.add_argument(
        "--no-memory-check",
        action="store_true",
        help="run training stages that the memory planner says will not fit this machine",
    )
    s.add_argument(
        "--executor",
        default="inline",
        metavar="NAME",
        help="inline (default: the points one after another in this process), local (the "
        "points' joined stage graph, independent stages side by side, --jobs at a time) or "
        "slurm (as `polymnesia run --executor slurm`)",
    )
    s.add_argument("--jobs", type=int, metavar="N", help="as `polymnesia run --jobs`")
    # a child of --executor local or slurm: build these stages of this point, nothing else
    s.add_argument("--point", type=int, help=argparse.SUPPRESS)
    s.add_argument("--stage", help=argparse.SUPPRESS)
    s.set_defaults(fn=cmd_sweep)


def _child_command(args: argparse.Namespace, merged: Any) -> Any:
    """A child's command line: the joined stages ``stages`` (a chain: a point that has the
    last has them all), built as that point's own stages."""
    import sys

    def command(stages: list[str]) -> list[str]:
        i, _ = merged.holder(stages[-1])
        own = {m: n for n, m in merged.names[i].items()}
        argv = [sys.executable, "-m", "polymnesia", "sweep", args.config, *args.overrides]
        argv += ["--point", str(i + 1), "--stage", ",".join(own[s] for s in stages)]
        argv += ["--lock-timeout", repr(float(args.lock_timeout))]
        argv += ["--no-memory-check"] if args.no_memory_check else []
        return argv + (["--trust-remote-code"] if args.trust_remote_code else [])

    return command


def _point_result(done: Any, names: dict[str, str]) -> Any:
    """The executor's result (by joined stage name) for one point's own stage names."""
    from polymnesia.pipeline.executors import LocalResult

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


def _build_child(args: argparse.Namespace, sweep: Any) -> int:
    """``--point N --stage A,B``: build those stages of point N (and reuse what they need)."""
    from polymnesia.errors import ConfigError
    from polymnesia.experiments import EXPERIMENTS
    from polymnesia.experiments.preflight import check_remote_code
    from polymnesia.experiments.sweep import load_point
    from polymnesia.pipeline.runner import run_pipeline

    if not 1 <= args.point <= len(sweep.points):
        raise ConfigError(f"--point {args.point}: the sweep has {len(sweep.points)} points")
    cfg = load_point(sweep, sweep.points[args.point - 1])
    specs = run_cli.build_specs(EXPERIMENTS.get(cfg.experiment), cfg, sweep.config)
    check_remote_code(cfg, args.trust_remote_code)
    if args.no_memory_check:
        from polymnesia.training.memory_fit import skip_memory_checks

        skip_memory_checks()
    run_pipeline(
        run_cli._one_stage(specs, args.stage),
        None,
        log=lambda m: print(m, flush=True),
        lock_timeout=args.lock_timeout,
    )
    return 0


def _finish_point(point: Any, run_dir: Path, args: argparse.Namespace, done: Any) -> str:
    """Write one point's run folder and report, reusing what the executor built (or, inline,
    building it); the closing line of the point."""
    from polymnesia.io import file_lock
    from polymnesia.pipeline.partial import write_missing
    from polymnesia.pipeline.run_dir import prepare_run_dir
    from polymnesia.pipeline.runner import run_pipeline
    from polymnesia.reports.measured import machine_info

    started = time.monotonic()
    extra = {"trust_remote_code": bool(args.trust_remote_code), "machine": machine_info()}
    prepare_run_dir(run_dir, point.cfg, extra=extra)
    with file_lock(run_dir / ".lock", f"run folder {run_dir}"):
        run_pipeline(
            point.specs, run_dir, log=lambda m: print(m, flush=True), lock_timeout=args.lock_timeout
        )
        if done is not None:
            run_cli._record_children(run_dir, point.planned, done, args.executor)
        write_missing(run_dir, None)
        report = point.exp.report(point.cfg, run_dir)
    return f"{run_summary(run_dir, time.monotonic() - started)}; report: {report}"


class _Point:
    """One point, checked: its config, protocol, stages, plan and run folder."""

    def __init__(self, spot: Any, cfg: Any, exp: Any, specs: list[Any], run_dir: Path) -> None:
        self.spot, self.cfg, self.exp, self.specs, self.run_dir = spot, cfg, exp, specs, run_dir
        self.planned: list[Any] = []


def _check_points(sweep: Any, cfgs: list[Any], out: Path, args: argparse.Namespace) -> list[Any]:
    """What ``run`` checks before anything runs, for every point (one line naming the point)."""
    from polymnesia.errors import PolymnesiaError
    from polymnesia.experiments import EXPERIMENTS
    from polymnesia.experiments.preflight import (
        check_harness_names,
        check_remote_code,
        check_run_dir_place,
        check_run_record,
        check_settings,
    )
    from polymnesia.experiments.sweep import point_error
    from polymnesia.pipeline.run_dir import check_run_dir

    points = []
    for spot, cfg in zip(sweep.points, cfgs, strict=True):
        try:
            exp = EXPERIMENTS.get(cfg.experiment)
            specs = run_cli.build_specs(exp, cfg, sweep.config)
            check_settings(cfg, specs, sweep.config)
            check_remote_code(cfg, args.trust_remote_code)
            run_dir = out / spot.label
            check_run_dir_place(run_dir)
            check_run_record(run_dir)
            check_run_dir(run_dir, cfg)
            if args.dry_run:
                check_harness_names(specs)
        except PolymnesiaError as e:
            raise point_error(spot, e) from None
        points.append(_Point(spot, cfg, exp, specs, run_dir))
    return points


def _print_dry_run(sweep: Any, points: list[Any], merged: Any, out: Path) -> None:
    from polymnesia.pipeline.runner import describe_plan

    keys = ", ".join(f"{k} ({len(v)})" for k, v in sweep.values.items())
    print(f"# sweep of {sweep.config}: {len(points)} point(s) over {keys}")
    if sweep.fixed:
        print(f"# fixed in every point: {' '.join(sweep.fixed)}")
    for p in points:
        todo = sum(1 for s in p.planned if s.status != "reuse")
        print(
            f"#   {p.spot.number}. {p.run_dir}: {' '.join(p.spot.overrides[len(sweep.fixed) :])} "
            f"({len(p.planned)} stages, {todo} not in the cache)"
        )
    print("\n# the points' stages joined (reuse = cached, resume = interrupted, run = new):")
    print(describe_plan(merged.planned))
    build = sum(1 for s in merged.planned if s.status != "reuse")
    shared = merged.shared()
    print(
        f"# {len(merged.planned)} distinct stages: {build} to build, "
        f"{len(merged.planned) - build} to reuse from the cache; {len(shared)} shared by "
        f"several points (each built once)" + (f": {', '.join(shared)}" if shared else "")
    )
    print(f"# sweep folder: {out} (compare.md across the points' runs)")
    for note in sweep.notes:
        print(f"# note: {note}")


def cmd_sweep(args: argparse.Namespace) -> int:
    from polymnesia.errors import ConfigError, PolymnesiaError
    from polymnesia.experiments.model_checks import check_hub_models
    from polymnesia.experiments.preflight import preflight
    from polymnesia.experiments.sweep import expand, load_points, merge_plans, point_error
    from polymnesia.io import atomic_write_json, file_lock
    from polymnesia.pipeline.executors import check_executor, run_local
    from polymnesia.pipeline.runner import plan
    from polymnesia.pipeline.slurm import check_slurm, run_slurm
    from polymnesia.runtime import partial_state

    check_executor(args.executor, args.jobs)
    sweep = expand(args.config, args.overrides)
    if args.stage:
        return _build_child(args, sweep)
    if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        raise ConfigError(
            "polymnesia sweep runs in one process, not under torchrun or accelerate launch; "
            "a stage of several devices runs as under `run --executor slurm` (docs/sweeps.md)"
        )
    if args.executor == "slurm" and any(k.split(".")[0] == "cluster" for k in sweep.values):
        raise ConfigError(
            "a sweep through --executor slurm submits every point's jobs with one cluster: "
            "section; fix cluster.* keys (key=value), do not sweep them"
        )
    cfgs = load_points(sweep)
    out = (
        Path(args.out) if args.out else Path("runs") / f"sweep-{cfgs[0].name}-{sweep.digest()[:8]}"
    )
    if out.exists() and not out.is_dir():
        raise PolymnesiaError(f"--out {out} is a file; name a folder for the sweep's runs")
    points = _check_points(sweep, cfgs, out, args)
    if args.executor == "slurm":
        check_slurm(points[0].cfg.cluster)
    for p in points:
        p.planned = plan(p.specs)
        to_run = {s.spec.name for s in p.planned if s.status != "reuse"}
        try:
            check_hub_models(p.cfg, p.specs, to_run, sweep.config)
        except ConfigError as e:
            raise point_error(p.spot, e) from None
    merged = merge_plans([p.planned for p in points])
    gpus: dict[str, int] | None = None
    if args.executor == "slurm":
        for i, p in enumerate(points):
            own = run_cli._cluster_gpus(p.cfg, p.specs, p.planned)
            if own is not None:
                gpus = (gpus or {}) | {merged.names[i][n]: k for n, k in own.items()}
    if args.dry_run:
        _print_dry_run(sweep, points, merged, out)
        return 0
    state = partial_state()
    for p in points:
        try:
            preflight(p.cfg, state.device.type, sweep.config, p.specs)
            if not args.no_memory_check and gpus is None:
                from polymnesia.experiments.planning import check_memory

                to_run = {s.spec.name for s in p.planned if s.status != "reuse"}
                check_memory(p.specs, to_run, state, sweep.config)
        except ConfigError as e:
            raise point_error(p.spot, e) from None
    if args.no_memory_check or gpus is not None:
        from polymnesia.training.memory_fit import skip_memory_checks

        skip_memory_checks()
    for note in sweep.notes:
        print(f"[polymnesia] note: {note}")
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "config": sweep.config,
        "sweep": sweep.values,
        "fixed": sweep.fixed,
        "executor": args.executor,
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
    log = lambda m: print(m, flush=True)  # noqa: E731
    with file_lock(out / ".lock", f"sweep folder {out}"):
        done = None
        if args.executor == "local":
            n_gpus = run_cli._gpu_count()
            done = run_local(
                merged.planned,
                _child_command(args, merged),
                out / "logs",
                args.jobs or (n_gpus or 2),
                log=log,
                gpus=n_gpus,
                status=out / "logs" / "executor.json",
            )
        elif args.executor == "slurm":
            done = run_slurm(
                merged.planned,
                _child_command(args, merged),
                out / "logs" / "slurm",
                points[0].cfg.cluster,
                jobs=args.jobs or 256,
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
            line = _finish_point(p, p.run_dir, args, own)
            print(f"[polymnesia] point {p.spot.number} ({p.spot.label}): {line}", flush=True)
            finished.append(p)
        comparison = ""
        if len(finished) >= 2:
            from polymnesia.reports.compare import write_comparison

            md, _page = write_comparison([p.run_dir for p in finished], out)
            comparison = f"; comparison: {md}"
    build = [s.spec.name for s in merged.planned if s.status != "reuse"]
    from polymnesia.training.progress import duration

    print(
        f"[polymnesia] sweep of {len(points)} point(s) in {duration(time.monotonic() - started)}: "
        f"{len(merged.planned)} distinct stages, {len(build)} built, "
        f"{len(merged.planned) - len(build)} reused from the cache, {len(merged.shared())} "
        f"shared by several points{comparison}",
        flush=True,
    )
    if done is not None and not done.ok:
        failed = ", ".join(f"{n} (log {path})" for n, path in done.failed.items())
        names = ", ".join(f"{p.spot.number} ({p.spot.label})" for p in missing)
        print(
            f"[polymnesia] error: {len(done.failed)} stage(s) failed: {failed}; points not "
            f"finished: {names}; the stages that finished are cached: run the same command "
            "again to retry the rest",
            flush=True,
        )
        return 1
    return 0

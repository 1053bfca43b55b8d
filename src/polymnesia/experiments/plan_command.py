"""What ``polymnesia plan`` prints: each training stage's estimated peak memory per device
(:mod:`polymnesia.experiments.planning`, :mod:`polymnesia.training.memory`), whether it fits
``--memory`` and what would make it fit, and with ``--schedule`` the stages laid out on a
cluster (:func:`polymnesia.pipeline.schedule.schedule`). The command line
(:mod:`polymnesia.cli.plan`) parses and calls :func:`plan_config`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from polymnesia.errors import ConfigError
from polymnesia.experiments.base import EXPERIMENTS
from polymnesia.experiments.loading import load_config
from polymnesia.experiments.model_checks import check_model_folders
from polymnesia.experiments.planning import stage_jobs, stage_plans
from polymnesia.pipeline.runner import check_specs
from polymnesia.pipeline.schedule import schedule as lay_out
from polymnesia.pipeline.schedule import sequential_seconds
from polymnesia.training.memory import gib
from polymnesia.training.memory_fit import remedies

Log = Callable[[str], None]


def plan_config(
    config: str,
    overrides: list[str],
    *,
    build_specs: Callable[[Any, Any, str], list[Any]],
    devices: int,
    engine: str,
    offload: bool,
    gradient_checkpointing: bool,
    device_type: str,
    memory: int | None,
    schedule: tuple[int, int] | None,
    peak_tflops: float,
    mfu: float,
    other_minutes: float,
    log: Log,
) -> int:
    """``polymnesia plan``: its lines through ``log``; the exit status."""
    cfg = load_config(config, overrides)
    specs = build_specs(EXPERIMENTS.get(cfg.experiment), cfg, config)
    check_specs(specs)  # a spec its stage kind would refuse is refused here, in one line
    try:  # a local model folder is read as validate reads it (its sizes size the plan)
        check_model_folders(cfg, specs)
    except ConfigError as e:
        raise ConfigError(f"config {config}: {e}") from None
    plans = stage_plans(
        specs,
        devices=devices,
        engine=engine,
        offload=offload,
        checkpointing=gradient_checkpointing,
        device_type=device_type,
    )
    each = f", {gib(memory)} GiB each" if memory else ""
    log(f"# {config}: {len(plans)} training stage(s), {devices} device(s){each}")
    if not plans:
        log("# no training stage")
        return 0
    width = max(len(p.label) for p in plans)
    shapes = {p.shape for p in plans}
    for shape in sorted(shapes, key=lambda s: s.name):
        log(
            f"# model {shape.name}: {shape.total_params / 1e6:,.1f}M parameters "
            f"({shape.num_layers} layers x {shape.hidden_size} wide, vocabulary {shape.vocab_size})"
        )
    bad = 0
    for p in plans:
        verdict = ""
        if memory:
            fits = p.total <= memory
            bad += not fits
            verdict = "  fits" if fits else "  DOES NOT FIT"
        log(f"{p.label:{width}s}  {p.line()}{verdict}")
    if memory and bad:
        worst = max(plans, key=lambda p: p.total)
        log(
            f"# {bad} stage(s) do not fit in {gib(memory)} GiB; the largest "
            f"({worst.label}) would fit with " + "; or ".join(remedies(worst, memory))
        )
    if schedule:
        _print_schedule(
            specs,
            schedule,
            memory=memory,
            devices=devices,
            engine=engine,
            peak_tflops=peak_tflops,
            mfu=mfu,
            other_minutes=other_minutes,
            log=log,
        )
    return 0


def _print_schedule(
    specs: list[Any],
    schedule: tuple[int, int],
    *,
    memory: int | None,
    devices: int,
    engine: str,
    peak_tflops: float,
    mfu: float,
    other_minutes: float,
    log: Log,
) -> None:
    """``--schedule``: each stage's GPUs and estimated time, laid out on the cluster by
    :func:`polymnesia.pipeline.schedule.schedule`."""
    nodes, per_node = schedule
    jobs = stage_jobs(
        specs,
        gpus_per_node=per_node,
        max_gpus=nodes * per_node,
        memory=memory,
        devices=devices,
        engine=engine,
        peak_flops=peak_tflops * 1e12,
        mfu=mfu,
        other_seconds=other_minutes * 60,
    )
    laid = lay_out(jobs, nodes, per_node)
    seq = sequential_seconds(jobs)
    log(
        f"\n# schedule on {nodes} node(s) x {per_node} GPU(s): training at {mfu:.0%} of "
        f"{peak_tflops:g} TFLOP/s per GPU (6N + 12LdT FLOPs per token over "
        f"steps x batch x length tokens), {other_minutes:g} min per stage that trains "
        "nothing; no queue wait or start-up"
    )
    width = max(len(j.name) for j in jobs)
    log(f"{'stage':{width}s}  gpus  {'hours':>7s}  {'start':>7s}  {'end':>7s}  nodes")
    for job in sorted(jobs, key=lambda j: (laid.start[j.name], j.name)):
        where = ",".join(str(n) for n in laid.nodes[job.name]) or "-"
        log(
            f"{job.name:{width}s}  {job.gpus:4d}  {job.seconds / 3600:7.2f}  "
            f"{laid.start[job.name] / 3600:7.2f}  {laid.end[job.name] / 3600:7.2f}  {where}"
        )
    ratio = laid.makespan / seq if seq else 0.0
    log(
        f"# the whole graph: {laid.makespan / 3600:.2f} h on the cluster; one stage at a time "
        f"(each on its GPUs): {seq / 3600:.2f} h; {ratio:.2f}x"
    )


# -- stages -> plans ---------------------------------------------------------------------------

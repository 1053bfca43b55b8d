"""``polymnesia plan``: the estimated peak memory per device of each training stage of a config.

    polymnesia plan configs/two_phase_paper.yaml --devices 8 --memory 80GB --engine fsdp2

The config is read, its stages built and held to their kinds' contracts as ``polymnesia run
--dry-run`` does; nothing is downloaded and no model is made. Each training stage's model is
traced back through its inputs to what makes it: a preset (``pretrain``, with the vocabulary of
its tokenizer stage), a Hub id or folder (``import_model``, a ``base_model``: its
``config.json`` when the folder or the Hub cache has it, else
:data:`~polymnesia.experiments.planning.KNOWN` for the models the shipped configs name), a
vocabulary expansion (``adapt_vocabulary``): :mod:`polymnesia.experiments.planning`. The
planner (:mod:`polymnesia.training.memory`) then prints a line per stage, and with
``--memory`` whether it fits and, when not, what would make it fit.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import Any

#: the memory sizes ``--memory`` accepts: no device has less than 1 MiB (a CPU's framework
#: overhead alone is 48 MiB), none more than 1 PiB
MIN_MEMORY = 2**20
MAX_MEMORY = 2**50
#: the most processes (GPUs) a stage is planned on
MAX_DEVICES = 1_000_000


def memory_size(text: str) -> int:
    """An argparse type: ``80GB``, ``80GiB``, ``80G``, ``512MB`` or bytes (``B``). GB and GiB
    both mean 2^30 bytes (as GPU makers count an "80 GB" card); 1 MiB to 1 PiB. A number
    without a unit (``80``) is refused: 80 bytes was never what was meant."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGTP]?)(I?B)?\s*", text.upper())
    shown = text if len(text) <= 40 else f"{text[:20]}...({len(text):,} characters)"
    if not m:
        raise argparse.ArgumentTypeError(
            f"'{shown}' is not a memory size; e.g. 80GB or 512MB (1MB to 1PB)"
        )
    if not m.group(2) and not m.group(3):
        if not MIN_MEMORY <= float(m.group(1)) * 2**30 <= MAX_MEMORY:  # not even as GB
            raise argparse.ArgumentTypeError(
                f"'{shown}' is out of range; accepted: 1MB to 1PB per device, with a unit "
                "(GB = GiB = 2^30 bytes)"
            )
        example = m.group(1) if len(m.group(1)) <= 12 else "80"
        raise argparse.ArgumentTypeError(
            f"'{shown}' has no unit; give GB or MB, e.g. --memory {example}GB (GB = GiB = "
            "2^30 bytes; B for bytes)"
        )
    scale = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}[m.group(2)]
    value = float(m.group(1)) * scale  # a float of 400 digits is inf: out of range below
    if not MIN_MEMORY <= value <= MAX_MEMORY:
        raise argparse.ArgumentTypeError(
            f"'{shown}' is out of range; accepted: 1MB to 1PB per device (GB = GiB = 2^30 bytes)"
        )
    return int(value)


def _positive(text: str) -> int:
    """An argparse type: a device count, 1 to :data:`MAX_DEVICES`."""
    shown = text if len(text) <= 40 else f"{text[:20]}...({len(text):,} characters)"
    digits = text.strip().lstrip("+-")
    if not digits.isascii() or not digits.isdigit():
        raise argparse.ArgumentTypeError(f"'{shown}' is not a whole number of devices")
    n = int(text) if len(digits) <= 20 else None  # a longer number is out of range anyway
    if n is None or not 1 <= n <= MAX_DEVICES:
        raise argparse.ArgumentTypeError(
            f"'{shown}' is out of range; accepted: 1 to {MAX_DEVICES:,} devices"
        )
    return n


def add_parser(sub: Any, build_specs: Callable[[Any, Any, str], list[Any]]) -> None:
    """The ``plan`` subcommand; ``build_specs`` is ``run``'s (polymnesia.cli.main), so a plan
    reads a config exactly as ``polymnesia run --dry-run`` does."""
    p = sub.add_parser(
        "plan",
        help="estimate the peak memory per device of each training stage of a config",
    )
    p.add_argument("config")
    p.add_argument("overrides", nargs="*", help="key.path=value overrides")
    p.add_argument(
        "--devices", type=_positive, default=1, help="processes (GPUs) per stage (default 1)"
    )
    p.add_argument(
        "--memory",
        type=memory_size,
        metavar="SIZE",
        help="memory per device, e.g. 80GB (GB = GiB = 2^30 bytes): says which stages fit",
    )
    p.add_argument(
        "--engine",
        choices=["single", "ddp", "fsdp2"],
        help="default: the config's train.engine, else ddp on several devices, single on one",
    )
    p.add_argument(
        "--offload", action="store_true", help="fsdp2: parameters and AdamW states in host memory"
    )
    p.add_argument(
        "--gradient-checkpointing",
        action="store_true",
        help="plan every stage with gradient checkpointing",
    )
    p.add_argument(
        "--device-type",
        choices=["cuda", "cpu"],
        default="cuda",
        help="what the stages run on (framework overhead, chunk size, AdamW kernel)",
    )
    p.add_argument(
        "--schedule",
        type=cluster_shape,
        metavar="NODESxGPUS",
        help="also lay the stages out on a cluster of NODES nodes of GPUS GPUs (e.g. 4x8): "
        "when each starts and ends, and the whole graph's length against one stage at a time",
    )
    p.add_argument(
        "--peak-tflops",
        type=float,
        default=PEAK_TFLOPS,
        help=f"--schedule: dense bf16 TFLOP/s per GPU (default {PEAK_TFLOPS:g}, an H200 "
        "measured by benchmarks/train_throughput.py)",
    )
    p.add_argument(
        "--mfu",
        type=float,
        default=MFU,
        help=f"--schedule: model FLOPs utilisation of training (default {MFU:g}, "
        "docs/benchmarks.md)",
    )
    p.add_argument(
        "--other-minutes",
        type=float,
        default=OTHER_MINUTES,
        help="--schedule: minutes of each stage that trains nothing (data, evaluation, "
        f"analysis; default {OTHER_MINUTES:g}), on one GPU, data stages on none",
    )
    p.set_defaults(fn=cmd_plan, build_specs=build_specs)


#: ``--schedule``'s defaults: the dense bf16 peak measured on an H200 and the loop's model
#: FLOPs utilisation there (44%, docs/benchmarks.md), rounded down; minutes per stage that
#: trains nothing
PEAK_TFLOPS = 494.0
MFU = 0.40
OTHER_MINUTES = 5.0


def cluster_shape(text: str) -> tuple[int, int]:
    """``NODESxGPUS`` (``4x8``): the cluster ``--schedule`` lays a run out on."""
    m = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", text)
    if not m or int(m.group(1)) < 1 or int(m.group(2)) < 1:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not NODESxGPUS: give the nodes and the GPUs of each, e.g. 4x8"
        )
    return int(m.group(1)), int(m.group(2))


def cmd_plan(args: argparse.Namespace) -> int:
    from polymnesia.experiments.plan_command import plan_config

    return plan_config(
        args.config,
        args.overrides,
        build_specs=args.build_specs,
        devices=args.devices,
        engine=args.engine,
        offload=args.offload,
        gradient_checkpointing=args.gradient_checkpointing,
        device_type=args.device_type,
        memory=args.memory,
        schedule=args.schedule,
        peak_tflops=args.peak_tflops,
        mfu=args.mfu,
        other_minutes=args.other_minutes,
        log=print,
    )

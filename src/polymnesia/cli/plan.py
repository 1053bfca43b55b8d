"""``polymnesia plan``: the estimated peak memory per device of each training stage of a config.

    polymnesia plan configs/two_phase_paper.yaml --devices 8 --memory 80GB --engine fsdp2

The config is read, its stages built and held to their kinds' contracts as ``polymnesia run
--dry-run`` does; nothing is downloaded and no model is made. Each training stage's model is
traced back through its inputs to what makes it: a preset (``pretrain``, with the vocabulary of
its tokenizer stage), a Hub id or folder (``import_model``, a ``base_model``: its
``config.json`` when the folder or the Hub cache has it, else :data:`KNOWN` for the models the
shipped configs name), a vocabulary expansion (``adapt_vocabulary``). The planner
(:mod:`polymnesia.training.memory`) then prints a line per stage, and with ``--memory`` whether
it fits and, when not, what would make it fit.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: shapes of Hub models the shipped configs name (their config.json), so a plan needs no
#: network: hidden, layers, heads, kv heads, intermediate, vocabulary
_MISTRAL_7B = (4096, 32, 32, 8, 14336, 32000)
_LLAMA3_8B = (4096, 32, 32, 8, 14336, 128256)
KNOWN: dict[str, tuple[int, int, int, int, int, int]] = {
    "mistralai/Mistral-7B-v0.1": _MISTRAL_7B,
    "mistralai/Mistral-7B-Instruct-v0.1": _MISTRAL_7B,
    "mistralai/Mistral-7B-Instruct-v0.2": _MISTRAL_7B,
    "meta-llama/Meta-Llama-3-8B": _LLAMA3_8B,
    "meta-llama/Meta-Llama-3-8B-Instruct": _LLAMA3_8B,
    "meta-llama/Llama-3.1-8B": _LLAMA3_8B,
    "meta-llama/Llama-3.1-8B-Instruct": _LLAMA3_8B,
}
#: encoders (XLM-R): hidden, layers, heads, intermediate, vocabulary, positions
KNOWN_ENCODERS: dict[str, tuple[int, int, int, int, int, int]] = {
    "FacebookAI/xlm-roberta-base": (768, 12, 12, 3072, 250002, 514),
    "xlm-roberta-base": (768, 12, 12, 3072, 250002, 514),
    "FacebookAI/xlm-roberta-large": (1024, 24, 16, 4096, 250002, 514),
    "xlm-roberta-large": (1024, 24, 16, 4096, 250002, 514),
}
#: stages whose model is a classifier (a small head instead of the LM head)
CLASSIFIER_STAGES = ("finetune_task", "sequential_step")


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
    from polymnesia.errors import ConfigError
    from polymnesia.experiments import EXPERIMENTS, load_config
    from polymnesia.experiments.preflight import check_model_folders
    from polymnesia.pipeline.runner import check_specs
    from polymnesia.training.memory import gib

    cfg = load_config(args.config, args.overrides)
    specs = args.build_specs(EXPERIMENTS.get(cfg.experiment), cfg, args.config)
    check_specs(specs)  # a spec its stage kind would refuse is refused here, in one line
    try:  # a local model folder is read as validate reads it (its sizes size the plan)
        check_model_folders(cfg, specs)
    except ConfigError as e:
        raise ConfigError(f"config {args.config}: {e}") from None
    plans = stage_plans(
        specs,
        devices=args.devices,
        engine=args.engine,
        offload=args.offload,
        checkpointing=args.gradient_checkpointing,
        device_type=args.device_type,
    )
    memory = f", {gib(args.memory)} GiB each" if args.memory else ""
    print(f"# {args.config}: {len(plans)} training stage(s), {args.devices} device(s){memory}")
    if not plans:
        print("# no training stage")
        return 0
    width = max(len(p.label) for p in plans)
    shapes = {p.shape for p in plans}
    for shape in sorted(shapes, key=lambda s: s.name):
        print(
            f"# model {shape.name}: {shape.total_params / 1e6:,.1f}M parameters "
            f"({shape.num_layers} layers x {shape.hidden_size} wide, vocabulary {shape.vocab_size})"
        )
    bad = 0
    for p in plans:
        verdict = ""
        if args.memory:
            fits = p.total <= args.memory
            bad += not fits
            verdict = "  fits" if fits else "  DOES NOT FIT"
        print(f"{p.label:{width}s}  {p.line()}{verdict}")
    if args.memory and bad:
        from polymnesia.training.memory import remedies

        worst = max(plans, key=lambda p: p.total)
        print(
            f"# {bad} stage(s) do not fit in {gib(args.memory)} GiB; the largest "
            f"({worst.label}) would fit with " + "; or ".join(remedies(worst, args.memory))
        )
    if args.schedule:
        print_schedule(specs, args)
    return 0


def print_schedule(specs: list[Any], args: argparse.Namespace) -> None:
    """``--schedule``: each stage's GPUs and estimated time, laid out on the cluster by
    :func:`polymnesia.pipeline.schedule.schedule`."""
    from polymnesia.pipeline.schedule import schedule, sequential_seconds

    nodes, per_node = args.schedule
    jobs = stage_jobs(
        specs,
        gpus_per_node=per_node,
        max_gpus=nodes * per_node,
        memory=args.memory,
        devices=args.devices,
        engine=args.engine,
        peak_flops=args.peak_tflops * 1e12,
        mfu=args.mfu,
        other_seconds=args.other_minutes * 60,
    )
    laid = schedule(jobs, nodes, per_node)
    seq = sequential_seconds(jobs)
    print(
        f"\n# schedule on {nodes} node(s) x {per_node} GPU(s): training at {args.mfu:.0%} of "
        f"{args.peak_tflops:g} TFLOP/s per GPU (6N + 12LdT FLOPs per token over "
        f"steps x batch x length tokens), {args.other_minutes:g} min per stage that trains "
        "nothing; no queue wait or start-up"
    )
    width = max(len(j.name) for j in jobs)
    print(f"{'stage':{width}s}  gpus  {'hours':>7s}  {'start':>7s}  {'end':>7s}  nodes")
    for job in sorted(jobs, key=lambda j: (laid.start[j.name], j.name)):
        where = ",".join(str(n) for n in laid.nodes[job.name]) or "-"
        print(
            f"{job.name:{width}s}  {job.gpus:4d}  {job.seconds / 3600:7.2f}  "
            f"{laid.start[job.name] / 3600:7.2f}  {laid.end[job.name] / 3600:7.2f}  {where}"
        )
    ratio = laid.makespan / seq if seq else 0.0
    print(
        f"# the whole graph: {laid.makespan / 3600:.2f} h on the cluster; one stage at a time "
        f"(each on its GPUs): {seq / 3600:.2f} h; {ratio:.2f}x"
    )


def stage_jobs(
    specs: list[Any],
    *,
    gpus_per_node: int,
    max_gpus: int,
    memory: int | None,
    devices: int,
    engine: str | None,
    peak_flops: float,
    mfu: float,
    other_seconds: float,
) -> list[Any]:
    """A :class:`~polymnesia.pipeline.schedule.Job` per stage: a training stage on the
    fewest GPUs (1, 2, 4, ... up to ``max_gpus``) on which its plan fits ``memory`` (on
    ``devices`` without ``memory``), for its model FLOPs at ``mfu`` of ``peak_flops``; any
    other stage ``other_seconds`` on one GPU, a data stage on none."""
    from polymnesia.errors import ConfigError
    from polymnesia.pipeline.schedule import Job
    from polymnesia.pipeline.stage import STAGES
    from polymnesia.training.config import train_configs
    from polymnesia.training.flops import train_flops_per_token

    if not (0 < mfu <= 1) or peak_flops <= 0:
        raise ConfigError("--mfu must be in (0, 1] and --peak-tflops above 0")
    by_name = {s.name: s for s in specs}
    jobs = []
    for spec in specs:
        needs = tuple(sorted({up for up in spec.inputs.values() if up in by_name}))
        category = STAGES.get(spec.kind).category
        plan = stage_plan(spec, by_name, engine=engine) if category == "training" else None
        if plan is None:
            gpus = 0 if category == "data" else 1
            jobs.append(Job(spec.name, other_seconds, gpus, needs))
            continue
        counts = [devices] if memory is None else _powers_of_two(max_gpus)
        chosen = None
        for n in counts:
            one = stage_plan(spec, by_name, devices=n, engine=engine if n == 1 else _multi(engine))
            if memory is None or one.total <= memory:
                chosen = (n, one)
                break
        if chosen is None:
            raise ConfigError(
                f"stage '{spec.name}' fits on no GPU count up to {max_gpus}"
                + (f" of {memory / 2**30:g} GiB each" if memory else "")
            )
        n, one = chosen
        train = train_configs(spec.params)[0][1]
        tokens = train.steps * train.batch_size * one.setup.seq_len
        shape = one.shape
        flops = tokens * train_flops_per_token(
            shape.total_params, shape.num_layers, shape.hidden_size, one.setup.seq_len
        )
        jobs.append(Job(spec.name, flops / (n * peak_flops * mfu), n, needs))
    return jobs


def _powers_of_two(limit: int) -> list[int]:
    out, n = [], 1
    while n <= limit:
        out.append(n)
        n *= 2
    return out


def _multi(engine: str | None) -> str | None:
    """The engine of a stage planned on several GPUs: fsdp2 unless the config names one."""
    return engine if engine in ("ddp", "fsdp2") else "fsdp2"


# -- stages -> plans ---------------------------------------------------------------------------
def stage_plans(
    specs: list[Any],
    *,
    devices: int = 1,
    engine: str | None = None,
    offload: bool = False,
    checkpointing: bool = False,
    device_type: str = "cuda",
) -> list[Any]:
    """A :class:`~polymnesia.training.memory.MemoryPlan` per training stage of ``specs``."""
    by_name = {s.name: s for s in specs}
    out = []
    for spec in specs:
        one = stage_plan(
            spec,
            by_name,
            devices=devices,
            engine=engine,
            offload=offload,
            checkpointing=checkpointing,
            device_type=device_type,
        )
        if one is not None:
            out.append(one)
    return out


def stage_plan(
    spec: Any,
    by_name: dict[str, Any],
    *,
    devices: int = 1,
    engine: str | None = None,
    offload: bool = False,
    checkpointing: bool = False,
    device_type: str = "cuda",
    download: bool = True,
) -> Any:
    """The :class:`~polymnesia.training.memory.MemoryPlan` of one training stage (``by_name``:
    every stage of its config, by name), or None for a stage that trains nothing.
    ``download``: a Hub model's config may be fetched (else only the Hub cache is read)."""
    from polymnesia.errors import ConfigError
    from polymnesia.pipeline.stage import STAGES
    from polymnesia.training.config import train_configs
    from polymnesia.training.memory import (
        Setup,
        frozen_fraction,
        plan,
        precision_of,
        resolve_engine,
    )

    if STAGES.get(spec.kind).category != "training":
        return None
    found = train_configs(spec.params)
    if not found:
        return None
    train = found[0][1]
    shape, dtype, attention = model_of(spec, by_name, download)
    if spec.kind in CLASSIFIER_STAGES:
        import dataclasses

        shape = dataclasses.replace(shape, lm_head=False, name=f"{shape.name} (classifier)")
    chosen = resolve_engine(engine or getattr(train, "engine", None) or "auto", devices)
    if chosen == "single" and devices > 1:
        raise ConfigError(f"engine single trains on 1 device, not {devices}; use ddp or fsdp2")
    per_step = train.batch_size // train.grad_accum
    micro = math.ceil(per_step / devices)
    lora_rank, lora_modules = _lora(spec.params)
    fused = getattr(train, "fused_adamw", None)
    setup = Setup(
        micro_batch=micro,
        seq_len=_length(spec.params, train),
        precision=precision_of(dtype, train.mixed_precision),
        engine=chosen,
        devices=devices,
        offload=offload or bool(getattr(train, "fsdp2_offload", False)),
        gradient_checkpointing=checkpointing or train.gradient_checkpointing,
        grad_accum=train.grad_accum,
        chunked_loss=train.chunked_loss,
        attention=attention or "sdpa",
        lora_rank=lora_rank,
        lora_modules=lora_modules,
        frozen_fraction=0.0 if lora_rank else frozen_fraction(shape, train.plugins),
        fused_adamw=fused if fused is not None else device_type == "cuda",
        device_type=device_type,
    )
    return plan(shape, setup, label=spec.name)


def check_memory(specs: list[Any], to_run: set[str], state: Any, source: str) -> None:
    """``run``'s check before anything trains: each training stage of ``specs`` named in
    ``to_run`` (those not reused from the cache) must fit, by the planner's estimate, in what
    this machine has per process (``state``: Accelerate's ``PartialState``): the available RAM
    shared by the node's processes on a CPU, the device's memory on a GPU. One line for the
    first that does not, with the planner's remedies. A stage whose model the planner cannot
    read without a download is not checked here (the training loop checks it before its first
    step)."""
    from polymnesia.errors import ConfigError
    from polymnesia.training.memory import device_bytes, gib, remedies, short_breakdown

    kind = state.device.type
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    have = device_bytes(state.device, local if kind == "cpu" else 1)
    if have is None:
        return
    by_name = {s.name: s for s in specs}
    for spec in specs:
        if spec.name not in to_run:
            continue
        try:
            p = stage_plan(
                spec, by_name, devices=state.num_processes, device_type=kind, download=False
            )
        except Exception:  # noqa: BLE001 - a model known only after its download, or
            continue  # an estimate that cannot be made: the loop checks it before training
        if p is None or p.total <= have:
            continue
        where = "of available RAM" if kind == "cpu" else f"on the {kind} device"
        per = " per process" if state.num_processes > 1 else ""
        raise ConfigError(
            f"config {source}: stage '{p.label}' needs about {gib(p.total)} GiB{per} "
            f"({short_breakdown(p)}) but this machine has {gib(have)} GiB {where}; it "
            f"would fit with {'; or '.join(remedies(p, have))}; nothing has run "
            f"(`polymnesia plan {source} --memory SIZE` plans it; --no-memory-check runs "
            "it anyway)"
        )


def _length(params: Any, train: Any) -> int:
    """Tokens per sequence: the stage's ``max_length`` (instruction or task examples), else
    the packed ``block_size``."""
    for section in ("instruct", "task"):
        n = getattr(getattr(params, section, None), "max_length", None)
        if isinstance(n, int):
            return n
    return int(train.block_size)


def _lora(params: Any) -> tuple[int | None, tuple[str, ...]]:
    from polymnesia.training.memory import LORA_DEFAULT

    inst = getattr(params, "instruct", None)
    if inst is not None and getattr(inst, "lora_rank", None):
        return int(inst.lora_rank), tuple(inst.lora.target_modules)
    method = getattr(params, "method", None)
    rank = getattr(params, "rank", None)
    if isinstance(method, str) and hasattr(params, "lora"):
        from polymnesia.continual.methods import get_method

        if get_method(method).uses_lora(rank) and rank is not None:
            return int(rank), tuple(params.lora.target_modules)
    return None, LORA_DEFAULT


def model_of(
    spec: Any, by_name: dict[str, Any], download: bool = True
) -> tuple[Any, str | None, str | None]:
    """(ModelShape, stored dtype, attention kernel) of the model ``spec`` trains, traced
    through its inputs."""
    from polymnesia.errors import ConfigError

    p = spec.params
    base_model = getattr(p, "base_model", None)
    if isinstance(base_model, str):
        return hub_shape(base_model, download), None, None
    model = getattr(p, "model", None)
    if spec.kind == "pretrain" and model is not None:
        if model.name_or_path:
            return hub_shape(model.name_or_path, download), model.dtype, model.attn_implementation
        return _preset(model, spec, by_name, download), model.dtype, model.attn_implementation
    if spec.kind == "import_model" and model is not None:
        return hub_shape(model.name_or_path, download), model.dtype, model.attn_implementation
    for role in ("model", "base", "prev"):
        up = spec.inputs.get(role)
        if up in by_name:
            shape, dtype, attention = model_of(by_name[up], by_name, download)
            if spec.kind == "adapt_vocabulary":
                import dataclasses

                a = p.adapt
                added = a.max_new_tokens or a.new_vocab_size
                shape = dataclasses.replace(shape, vocab_size=shape.vocab_size + added)
            return shape, dtype, attention
    raise ConfigError(f"stage '{spec.name}' ({spec.kind}): cannot tell which model it trains")


def _preset(model: Any, spec: Any, by_name: dict[str, Any], download: bool = True) -> Any:
    from polymnesia.training.memory import ModelShape

    vocab = 32000
    tok_stage = by_name.get(spec.inputs.get("tokenizer", ""))
    if tok_stage is not None:
        t = tok_stage.params.tokenizer
        vocab = hub_vocab(t.name_or_path, download) if t.name_or_path else int(t.vocab_size)
    dims = model.dims()
    return ModelShape.from_preset(
        model.preset or "tiny", vocab, tied=model.tie_word_embeddings, **dims
    )


def hub_vocab(name: str, download: bool = True) -> int:
    if name in KNOWN:
        return KNOWN[name][5]
    if name in KNOWN_ENCODERS:
        return KNOWN_ENCODERS[name][4]
    return int(hub_shape(name, download).vocab_size)


def hub_shape(name: str, download: bool = True) -> Any:
    """The shape of a Hub model or local folder: :data:`KNOWN`, the folder's config.json,
    the Hub cache, then the Hub (unless ``HF_HUB_OFFLINE``)."""
    from polymnesia.errors import ConfigError
    from polymnesia.training.memory import ModelShape

    if name in KNOWN:
        h, n_layers, heads, kv, inter, vocab = KNOWN[name]
        return ModelShape(h, n_layers, heads, kv, inter, vocab, name=name)
    if name in KNOWN_ENCODERS:
        h, n_layers, heads, inter, vocab, positions = KNOWN_ENCODERS[name]
        return ModelShape(
            h,
            n_layers,
            heads,
            heads,
            inter,
            vocab,
            tied_embeddings=True,
            gated_mlp=False,
            bias=True,
            dropout=True,
            extra_params=(positions + 1) * h,
            name=name,
        )
    from transformers import AutoConfig

    folder = Path(name).expanduser()
    if (folder / "model" / "config.json").exists():
        folder = folder / "model"
    tries: list[dict[str, Any]] = [{"local_files_only": True}]
    if download and os.environ.get("HF_HUB_OFFLINE", "0") not in ("1", "true", "True"):
        tries.append({})
    err: Exception | None = None
    for kw in tries:
        try:
            conf = AutoConfig.from_pretrained(
                str(folder) if folder.exists() else name, trust_remote_code=False, **kw
            )
            return ModelShape.from_hf_config(conf, name=name)
        except Exception as e:  # noqa: BLE001 (any failure: try the next source, then say so)
            err = e
    raise ConfigError(
        f"cannot read the config of model '{name}' (not cached, and the Hub said: "
        f"{str(err).strip().splitlines()[0] if err else 'nothing'}); download it once or "
        "give a local folder"
    )

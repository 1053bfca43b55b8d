"""From a config's stage specs to memory plans and cluster jobs, for ``polymnesia plan``,
``run``'s memory check before anything trains, and the executors' resources.

Each training stage's model is traced back through its inputs to what makes it
(:func:`model_of`): a preset (``pretrain``, with the vocabulary of its tokenizer stage), a
Hub id or folder (``import_model``, a ``base_model``: its ``config.json`` when the folder or
the Hub cache has it, else :data:`KNOWN` for the models the shipped configs name), a
vocabulary expansion (``adapt_vocabulary``). :func:`stage_plan` hands the shape, the
stage's training settings, LoRA and frozen share to the planner
(:func:`polymnesia.training.memory.plan`); :func:`check_memory` refuses a stage that does
not fit with what would make it fit; :func:`stage_jobs` sizes each stage for
:func:`polymnesia.pipeline.schedule.schedule` (the fewest GPUs it fits on, its FLOPs at an
MFU)."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from polymnesia.continual.methods import get_method
from polymnesia.errors import ConfigError
from polymnesia.pipeline.schedule import Job
from polymnesia.pipeline.stage import STAGES
from polymnesia.training.config import train_configs
from polymnesia.training.flops import train_flops_per_token
from polymnesia.training.memory import Setup, gib, plan
from polymnesia.training.memory_fit import (
    device_bytes,
    frozen_fraction,
    precision_of,
    remedies,
    resolve_engine,
    short_breakdown,
)
from polymnesia.training.model_shape import LORA_DEFAULT, ModelShape

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


def stage_gpus(
    specs: list[Any], to_run: set[str], *, gpu_bytes: int, gpus_per_node: int, max_nodes: int
) -> dict[str, int]:
    """The GPUs ``--executor slurm`` asks for each stage of ``specs`` named in ``to_run``: a
    training stage the fewest (1, 2, 4, ... up to ``gpus_per_node * max_nodes``) on which its
    memory plan fits ``gpu_bytes`` per GPU, planned with the engine it will run (its
    ``train.engine``: ``auto`` is DDP on more than one), a data stage none, any other stage
    one. A stage that fits on no count is refused in one line with what would make it
    fit."""
    by_name = {s.name: s for s in specs}
    limit = gpus_per_node * max_nodes
    out: dict[str, int] = {}
    for spec in specs:
        if spec.name not in to_run:
            continue
        category = STAGES.get(spec.kind).category
        if category != "training" or stage_plan(spec, by_name) is None:
            out[spec.name] = 0 if category == "data" else 1
            continue
        best = None
        for n in _powers_of_two(limit):
            one = stage_plan(spec, by_name, devices=n)
            best = one
            if one.total <= gpu_bytes:
                out[spec.name] = n
                break
        if spec.name not in out:
            fixes = remedies(best, gpu_bytes, limit) if best is not None else []
            raise ConfigError(
                f"stage '{spec.name}' fits on no job of up to {limit} GPU(s) of "
                f"{gpu_bytes / 2**30:g} GiB (cluster.gpus_per_node {gpus_per_node} x "
                f"cluster.max_nodes {max_nodes}; planned {gib(best.total) if best else '?'} "
                f"GiB per GPU on {limit})"
                + (f"; it would fit with {'; or '.join(fixes)}" if fixes else "")
            )
    return out


def _powers_of_two(limit: int) -> list[int]:
    out, n = [], 1
    while n <= limit:
        out.append(n)
        n *= 2
    return out


def _multi(engine: str | None) -> str | None:
    """The engine of a stage planned on several GPUs: fsdp2 unless the config names one."""
    return engine if engine in ("ddp", "fsdp2") else "fsdp2"


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

    inst = getattr(params, "instruct", None)
    if inst is not None and getattr(inst, "lora_rank", None):
        return int(inst.lora_rank), tuple(inst.lora.target_modules)
    method = getattr(params, "method", None)
    rank = getattr(params, "rank", None)
    lora = hasattr(params, "lora")
    if isinstance(method, str) and rank is not None and lora and get_method(method).uses_lora(rank):
        return int(rank), tuple(params.lora.target_modules)
    return None, LORA_DEFAULT


def model_of(
    spec: Any, by_name: dict[str, Any], download: bool = True
) -> tuple[Any, str | None, str | None]:
    """(ModelShape, stored dtype, attention kernel) of the model ``spec`` trains, traced
    through its inputs."""

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

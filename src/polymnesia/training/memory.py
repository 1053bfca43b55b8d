"""The memory planner: peak memory per device of a training stage, estimated before it runs.

Pure arithmetic on a model's shape (:class:`ModelShape`: from a transformers config or a
polymnesia preset) and a training setup (:class:`Setup`: which parameters train, precision,
engine and device count, offload, gradient checkpointing, micro-batch, length, loss). No
tensor is made. :func:`plan` returns a :class:`MemoryPlan` whose parts add up to the peak.
:mod:`polymnesia.training.model_shape` holds the shape, and
:mod:`polymnesia.training.memory_fit` what comes after a plan: whether it fits a device
(:func:`~polymnesia.training.memory_fit.check_fits`, in one line naming what would make it
fit), the remedies, and a plan made from a stage's model and training config.

**Parameters, gradients, AdamW.** Parameters are stored in the *master* dtype (float32 for
``fp32`` and ``bf16-mixed``, bfloat16 for ``bf16``: a model loaded in bfloat16), gradients
and AdamW's two moments in the same dtype (``torch.optim.AdamW`` makes its states like the
parameter), for the trainable parameters only (LoRA: the adapters, kept in float32 by PEFT;
layer freezing: the unfrozen share). ``fsdp2`` divides all three by the device count (each
process holds a shard); with ``offload`` they stay in host memory (``MemoryPlan.host``).

**Activations** (saved for the backward pass), per decoder block and token, written for the
Llama/Mistral block (RMSNorm, RoPE, grouped-query attention, SwiGLU, no dropout): the
accounting of Korthikanti et al. 2022 (section 4.1: ``sbh(34 + 5as/h)`` bytes per layer for
GPT with 16-bit activations), redone for this block and for what torch's autograd actually
keeps. With ``h`` the width, ``q = heads x head_dim``, ``k`` the key/value width (``q``: keys
and values are repeated to every head when a padding mask is given, which is what
instruction batches carry, so ``q`` is used), ``I`` the MLP width, ``n`` heads, ``s`` the
length, in bytes per token (see :func:`block_activation_bytes`):

* ``fp32``: ``4 (6h + 2q + 2k + 4I) + attn``; ``attn`` = ``4 n s`` (eager: the softmax
  output) or ``4q + 4n`` (sdpa: its output and log-sum-exp); each RMSNorm keeps its input,
  its normalised input and its output (3h); the attention keeps RoPE'd queries, keys and
  values (2k) and the contiguous output the projection reads; SwiGLU keeps gate,
  SiLU(gate), up and their product (4I).
* ``bf16-mixed`` (autocast; residual stream and RMSNorm in float32): ``26h + 4q + 4k + 8I +
  attn``, ``attn`` = ``6 n s`` (eager: float32 softmax and its bfloat16 copy) or ``2q + 4n``;
  each linear layer keeps its own bfloat16 copy of its input (autocast casts per call).
* ``bf16``: ``16h + 4q + 4k + 8I + attn`` (RMSNorm upcasts its input to float32 inside).

Gradient checkpointing keeps only each block's input (``h`` residual bytes per token) and
recomputes one block at a time in the backward pass. The backward pass of a block needs a
workspace of about the block's activations again (twice with checkpointing: the recomputed
block and its gradients; eager attention adds the float32 gradients of the softmax's output
and input, ``2 x 4 n s``). An encoder block (``gated_mlp=False``:
one up-projection and GELU, ``2I`` instead of ``4I``; with dropout: one byte of mask per
dropped element) uses the same accounting.

**Loss.** polymnesia's chunked loss (``train.chunked_loss``) never holds ``(B, L, V)``
logits: its forward pass leaves the hidden states' gradient (``B L h``) and the LM head's
float32 gradient (``V h x 4``), plus one chunk of float32 logits. The model's own loss holds
about ``12 B L V`` bytes at the start of the backward pass (float32 log-softmax output and two
float32 gradients of the same size).

**Buffers.** DDP keeps a gradient-sized set of all-reduce buckets for the whole run
(Accelerate's default, ``gradient_as_bucket_view=False``) and one bucket's reduction buffer.
Autocast keeps a bfloat16 copy
of every weight it cast from the forward to the backward pass. Foreach AdamW (not fused)
makes one parameter-sized temporary per step. FSDP2 (``fully_shard`` per block and at the
root, reshard after forward) holds the root's parameters (embeddings, final norm, head)
unsharded in the compute dtype through forward and backward, all-gathers two blocks
(current and prefetched) and, in the backward pass, one block's unsharded gradients and
their float32 reduce-scatter input.

**Peak.** Three moments are compared: the start of the backward pass (every activation,
the loss's buffers, gradients only from earlier micro-batches), its end (every gradient,
one block's recompute and gradients) and the optimizer step (gradients, AdamW states and
its temporary). The largest is the peak; :class:`MemoryPlan` reports what is live then,
plus a constant framework overhead per device (:data:`OVERHEAD`: CUDA context, cuBLAS and
NCCL workspaces on a GPU, or the autograd engine's and thread pools' memory on a CPU).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Literal

from polymnesia.errors import ConfigError
from polymnesia.training.model_shape import LORA_DEFAULT, ModelShape

Precision = Literal["fp32", "bf16-mixed", "bf16"]
Engine = Literal["single", "ddp", "fsdp2"]
PRECISIONS: tuple[str, ...] = ("fp32", "bf16-mixed", "bf16")
ENGINES: tuple[Engine, ...] = ("single", "ddp", "fsdp2")
GIB = 2**30
MIB = 2**20
#: framework memory per device that no tensor accounts for (bytes): CUDA context, cuBLAS and
#: NCCL workspaces and the caching allocator's rounding on a GPU; autograd's and the thread
#: pools' memory on a CPU (measured: benchmarks/memory_plan.py, docs/benchmarks.md)
OVERHEAD: dict[str, int] = {"cuda": 2 * GIB, "cpu": 48 * MIB}
#: engines under which the training loop makes the chunked loss (elsewhere the model's own)
CHUNKED_LOSS_ENGINES: tuple[str, ...] = ("single", "ddp")
#: float32 logits per chunk of the chunked loss (polymnesia.runtime.LOGIT_CHUNK_BYTES)
CHUNK_BYTES: dict[str, int] = {"cpu": 4 * MIB, "cuda": 256 * MIB}
MIN_CHUNK_ROWS = 256
#: DDP's bucket size (``bucket_cap_mb``, 25 MiB by default)
DDP_BUCKET = 25 * MIB


@dataclass(frozen=True)
class Setup:
    """How a stage trains, as far as memory goes."""

    micro_batch: int = 1  # sequences per device per forward pass
    seq_len: int = 128
    precision: Precision = "fp32"
    engine: Engine = "single"
    devices: int = 1  # processes the global batch is split over (engine ddp or fsdp2)
    offload: bool = False  # fsdp2: parameters, gradients and AdamW states in host memory
    gradient_checkpointing: bool = False
    grad_accum: int = 1
    chunked_loss: bool = True  # train.chunked_loss (applies where CHUNKED_LOSS_ENGINES say)
    attention: str = "sdpa"  # eager (the softmax is kept: n s per token) or sdpa/flash
    lora_rank: int | None = None
    lora_modules: tuple[str, ...] = LORA_DEFAULT
    frozen_fraction: float = 0.0  # share of the blocks' parameters frozen (layer freezing)
    fused_adamw: bool = False  # no parameter-sized temporary at the step
    device_type: str = "cuda"  # overhead and chunk size: cuda or cpu

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise ConfigError(f"precision '{self.precision}' is not one of {', '.join(PRECISIONS)}")
        if self.engine not in ENGINES:
            raise ConfigError(f"engine '{self.engine}' is not one of {', '.join(ENGINES)}")
        if self.devices < 1 or (self.engine == "single" and self.devices != 1):
            raise ConfigError(
                f"{self.devices} devices: engine single trains on 1; use ddp or fsdp2 for more"
            )
        if self.offload and self.engine != "fsdp2":
            raise ConfigError("offload needs engine fsdp2 (it offloads the sharded state)")
        if not 0.0 <= self.frozen_fraction <= 1.0:
            raise ConfigError(f"frozen_fraction must be in [0, 1], got {self.frozen_fraction}")
        if self.micro_batch < 1 or self.seq_len < 1 or self.grad_accum < 1:
            raise ConfigError("micro_batch, seq_len and grad_accum must be positive")

    def describe(self) -> str:
        engine = self.engine if self.engine == "single" else f"{self.engine} x{self.devices}"
        parts = [engine, self.precision, f"micro-batch {self.micro_batch} x {self.seq_len}"]
        if self.offload:
            parts.append("offload")
        if self.gradient_checkpointing:
            parts.append("checkpointing")
        if self.lora_rank is not None:
            parts.append(f"LoRA r{self.lora_rank}")
        if self.frozen_fraction:
            parts.append(f"{self.frozen_fraction:.0%} of blocks frozen")
        if self.grad_accum > 1:
            parts.append(f"accumulation {self.grad_accum}")
        return ", ".join(parts)


@dataclass(frozen=True)
class MemoryPlan:
    """Bytes per device at the estimated peak, by part (they add up to :attr:`total`)."""

    shape: ModelShape
    setup: Setup
    phase: str  # when the peak is: "backward start", "backward end" or "optimizer step"
    parameters: int
    gradients: int
    optimizer: int
    activations: int  # saved activations and the loss's buffers
    buffers: int  # DDP buckets, autocast copies, FSDP2 gathers, AdamW temporaries, workspace
    overhead: int
    host: int = 0  # host bytes per process for offloaded state (not in total)
    trainable: int = 0  # trainable parameters
    label: str = ""  # the stage it plans

    @property
    def total(self) -> int:
        return (
            self.parameters
            + self.gradients
            + self.optimizer
            + self.activations
            + self.buffers
            + self.overhead
        )

    def line(self) -> str:
        """``12.3 GiB per device (params 3.4 + grads 3.4 + AdamW 6.8 + ...) at ...``"""
        parts = [
            ("params", self.parameters),
            ("grads", self.gradients),
            ("AdamW", self.optimizer),
            ("activations", self.activations),
            ("buffers", self.buffers),
            ("overhead", self.overhead),
        ]
        shown = " + ".join(f"{name} {gib(v)}" for name, v in parts)
        host = f"; host {gib(self.host)} GiB per process" if self.host else ""
        return (
            f"{gib(self.total)} GiB per device ({shown}) at {self.phase}; "
            f"{self.setup.describe()}{host}"
        )

    def replan(self, **changes: Any) -> MemoryPlan:
        """The plan of the same stage with ``changes`` to its :class:`Setup`."""
        return dataclasses.replace(
            plan(self.shape, dataclasses.replace(self.setup, **changes)), label=self.label
        )


def gib(n: float) -> str:
    """Bytes as GiB with 2 significant decimals (``0.004``, ``1.23``, ``61.2``)."""
    v = n / GIB
    if v >= 10:
        return f"{v:.1f}"
    if v >= 0.1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def _bytes(precision: str) -> tuple[int, int, int]:
    """(master, compute, residual-stream) bytes per element of ``precision``."""
    return {"fp32": (4, 4, 4), "bf16-mixed": (4, 2, 4), "bf16": (2, 2, 2)}[precision]


def block_activation_bytes(shape: ModelShape, setup: Setup) -> int:
    """Bytes one block keeps for its backward pass, per token (module docstring)."""
    h, q, i, n, s = (
        shape.hidden_size,
        shape.q_width,
        shape.intermediate_size,
        shape.num_heads,
        setup.seq_len,
    )
    k = q  # keys and values repeated to every head (padded batches); GQA kernels keep less
    mlp = 4 * i if shape.gated_mlp else 2 * i
    eager = setup.attention == "eager"
    if setup.precision == "fp32":
        attn = 4 * n * s if eager else 4 * q + 4 * n
        out = 4 * (6 * h + 2 * q + 2 * k + mlp) + attn
    elif setup.precision == "bf16-mixed":
        attn = 6 * n * s if eager else 2 * q + 4 * n
        out = 26 * h + 4 * q + 4 * k + 2 * mlp + attn
    else:
        attn = 6 * n * s if eager else 2 * q + 4 * n
        out = 16 * h + 4 * q + 4 * k + 2 * mlp + attn
    if shape.dropout:  # a byte of mask per dropped element: two residual dropouts, the probs
        out += 2 * h + (n * s if eager else 0)
    return out


def _trainable(shape: ModelShape, setup: Setup) -> tuple[int, int, int]:
    """(trainable parameters stored in the master dtype, LoRA parameters (float32),
    trainable parameters of one block)."""
    if setup.lora_rank is not None:
        lora = shape.lora_params(setup.lora_rank, setup.lora_modules)
        return 0, lora, lora // shape.num_layers
    blocks = shape.num_layers * shape.block_params
    frozen = int(round(setup.frozen_fraction * blocks))
    per_block = int(round(shape.block_params * (1 - setup.frozen_fraction)))
    return shape.total_params - frozen, 0, per_block


def _largest_trainable(shape: ModelShape, setup: Setup) -> int:
    """Elements of the largest trainable tensor."""
    if setup.lora_rank is not None:
        mats = shape.matrices()
        return max(setup.lora_rank * max(mats[m]) for m in setup.lora_modules if m in mats)
    return max(shape.embedding_params, *(a * b for a, b in shape.matrices().values()))


def _loss_bytes(shape: ModelShape, setup: Setup, tokens: int, compute: int) -> tuple[int, int]:
    """(bytes the loss holds from its forward to its backward pass, its transient peak)."""
    if not shape.lm_head:
        return 0, 0
    v, h = shape.vocab_size, shape.hidden_size
    chunked = setup.chunked_loss and setup.engine in CHUNKED_LOSS_ENGINES
    if not chunked:
        return 12 * tokens * v, 0
    held = tokens * h * compute + (0 if setup.lora_rank is not None else 4 * v * h)
    rows = max(MIN_CHUNK_ROWS, CHUNK_BYTES.get(setup.device_type, CHUNK_BYTES["cuda"]) // (4 * v))
    rows = min(rows, tokens)
    chunk = rows * v * (4 + (compute if compute != 4 else 0))
    return held, chunk


def plan(shape: ModelShape, setup: Setup, *, label: str = "") -> MemoryPlan:
    """The estimated peak memory per device of training ``shape`` as ``setup`` says."""
    master, compute, resid = _bytes(setup.precision)
    n_dev = setup.devices if setup.engine == "fsdp2" else 1
    fsdp = setup.engine == "fsdp2"
    full, lora, block_train = _trainable(shape, setup)
    trainable = full + lora
    train_bytes = full * master + lora * 4  # the trainable parameters' own bytes
    tokens = setup.micro_batch * setup.seq_len

    params = shape.total_params * master + lora * 4
    grads = train_bytes
    adam = 2 * train_bytes
    params, grads, adam = (math.ceil(x / n_dev) for x in (params, grads, adam))
    host = 0
    if setup.offload:
        host, params, grads, adam = params + grads + adam, 0, 0, 0

    # saved activations
    per_block = block_activation_bytes(shape, setup)
    if setup.gradient_checkpointing:
        acts = shape.num_layers * tokens * shape.hidden_size * resid
        workspace = 2 * per_block * tokens  # one block recomputed, and its gradients
    else:
        acts = shape.num_layers * per_block * tokens
        workspace = per_block * tokens
    if setup.attention == "eager":  # the softmax's backward: its output's and input's gradients
        workspace += 2 * 4 * shape.num_heads * setup.seq_len * tokens
    acts += tokens * shape.hidden_size * (3 * resid)  # the final norm
    held, chunk = _loss_bytes(shape, setup, tokens, compute)

    # buffers
    always = 0
    forward_only = 0
    backward_only = 0
    if setup.engine == "ddp":  # its all-reduce buckets, and one bucket's reduction buffer
        always += train_bytes + min(DDP_BUCKET, train_bytes)
    if setup.precision == "bf16-mixed" and not fsdp:
        # autocast's bfloat16 copies of the (matmul) weights, kept for the backward pass
        forward_only += shape.num_layers * sum(a * b for a, b in shape.matrices().values()) * 2
    if setup.fused_adamw:
        step_temp = 0
    elif setup.device_type == "cpu":  # torch's per-tensor AdamW: one tensor's temporaries
        step_temp = math.ceil(_largest_trainable(shape, setup) * master / n_dev)
    else:  # foreach AdamW: one temporary the size of all trainable parameters
        step_temp = math.ceil(train_bytes / n_dev)
    if fsdp:
        root_full = shape.root_params * compute  # unsharded through forward and backward
        gathers = 2 * shape.block_params * compute
        forward_only += root_full + gathers
        reduce = block_train * (compute + 4)
        root_grads = (shape.root_params if setup.lora_rank is None else 0) * (compute + 4)
        backward_only += root_full + gathers + max(reduce, root_grads)
    if setup.offload:
        step_temp = 0  # the step runs on the host

    grads_before = 0
    if setup.grad_accum > 1:  # earlier micro-batches' gradients (FSDP2: kept unsharded)
        grads_before = grads + (block_train * shape.num_layers * compute if fsdp else 0)
    phases = {
        "backward start": (
            grads_before,
            acts + held,
            always + forward_only + max(chunk, workspace),
        ),
        "backward end": (grads, 0, always + backward_only + workspace),
        "optimizer step": (grads, 0, always + step_temp),
    }
    phase = max(phases, key=lambda p: sum(phases[p]))
    g, a, b = phases[phase]
    return MemoryPlan(
        shape=shape,
        setup=setup,
        phase=phase,
        parameters=params,
        gradients=g,
        optimizer=adam,
        activations=a,
        buffers=b,
        overhead=OVERHEAD.get(setup.device_type, OVERHEAD["cuda"]),
        host=host,
        trainable=trainable,
        label=label,
    )


# -- fitting ----------------------------------------------------------------------------------


# -- from a config ----------------------------------------------------------------------------


__all__ = [
    "ENGINES",
    "PRECISIONS",
    "MemoryPlan",
    "Setup",
    "block_activation_bytes",
    "plan",
]

"""Model FLOPs per token and model FLOPs utilisation (MFU), pure arithmetic.

Training a decoder costs about ``6 N`` FLOPs per token for its matrix
multiplications (forward 2N, backward 4N; Kaplan et al. 2020, section 2.1)
plus ``12 L d T`` for attention scores and their weighted sums (QK^T and AV,
forward and backward; PaLM, Chowdhery et al. 2022, appendix B), with ``N``
the parameters that enter a matrix multiplication (every parameter except the
input embedding lookup; a tied LM head counts once), ``L`` layers, ``d`` the
model width and ``T`` the sequence length. The causal mask's halving of the
attention work is not credited, as in PaLM. Inference (a forward pass) costs a
third of that: ``2 N + 4 L d T``. MFU is achieved model FLOPs per second over
the device's peak.
"""

from __future__ import annotations

from typing import Any

import torch


def matmul_parameters(model: torch.nn.Module) -> int:
    """Parameters that enter a matrix multiplication: all but the input embedding table."""
    total = sum(p.numel() for p in model.parameters())
    get_in = getattr(model, "get_input_embeddings", None)
    get_out = getattr(model, "get_output_embeddings", None)
    emb = get_in() if callable(get_in) else None
    head = get_out() if callable(get_out) else None
    if emb is None:
        return total
    tied = head is not None and head.weight is emb.weight
    return total if tied else total - emb.weight.numel()


def train_flops_per_token(n_params: int, n_layers: int, width: int, seq_len: int) -> float:
    """``6 N + 12 L d T``: model FLOPs of training on one token."""
    return 6.0 * n_params + 12.0 * n_layers * width * seq_len


def forward_flops_per_token(n_params: int, n_layers: int, width: int, seq_len: int) -> float:
    """``2 N + 4 L d T``: model FLOPs of a forward pass on one token."""
    return 2.0 * n_params + 4.0 * n_layers * width * seq_len


def mfu(tokens_per_s: float, flops_per_token: float, peak_flops: float) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s over ``peak_flops``."""
    return tokens_per_s * flops_per_token / peak_flops


def model_shape(model: torch.nn.Module) -> tuple[int, int, int]:
    """(matmul parameters, layers, width) of an HF decoder."""
    conf: Any = model.config
    return matmul_parameters(model), int(conf.num_hidden_layers), int(conf.hidden_size)


def matmul_peak(
    device: torch.device | str, dtype: torch.dtype, n: int = 2048, reps: int = 5
) -> float:
    """Measured FLOP/s of an ``n x n`` matrix product on ``device`` (the benchmarks' peak)."""
    import time

    dev = torch.device(device)
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    a @ b  # warm-up
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    if dev.type == "cuda":
        torch.cuda.synchronize()
    return 2.0 * n**3 * reps / (time.perf_counter() - t)

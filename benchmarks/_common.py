"""Shared pieces of the benchmark scripts: a tiny model and real multilingual token blocks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch


def udhr_blocks(
    block_size: int = 128,
    vocab_size: int = 2000,
    langs: tuple[str, ...] = ("en", "ru", "ar", "zh", "hi", "es"),
):  # type: ignore[no-untyped-def]
    """A byte-level BPE trained on packaged UDHR text and the text packed into blocks."""
    from polymnesia.data.sources import get_source
    from polymnesia.tokenizers.bpe import train_bpe
    from polymnesia.training.data import pack_documents

    src = get_source("udhr")
    texts = [r.text for lang in langs for r in src.records(lang)]
    tok = train_bpe(texts, vocab_size)
    ids = tok(texts, add_special_tokens=False)["input_ids"]
    blocks = pack_documents([[tok.bos_token_id, *x] for x in ids], block_size, tok.eos_token_id)
    return tok, blocks


def tiny_model(vocab_size: int, preset: str = "tiny", seed: int = 0) -> torch.nn.Module:
    from transformers import MistralConfig, MistralForCausalLM

    from polymnesia.models.presets import PRESETS

    p = PRESETS.get(preset)
    torch.manual_seed(seed)
    conf = MistralConfig(
        vocab_size=vocab_size,
        hidden_size=p.hidden_size,
        num_hidden_layers=p.num_hidden_layers,
        num_attention_heads=p.num_attention_heads,
        num_key_value_heads=p.num_key_value_heads,
        intermediate_size=p.intermediate_size,
        tie_word_embeddings=False,
        sliding_window=None,
    )
    return MistralForCausalLM(conf)


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def peak_flops(device: torch.device, dtype: torch.dtype) -> tuple[float, str]:
    """The device's measured matmul peak (FLOP/s) and a line saying what it is."""
    from polymnesia.training.flops import matmul_peak

    peak = matmul_peak(device, dtype)
    what = (
        f"{device.type} {str(dtype).removeprefix('torch.')} matmul peak measured: "
        f"{peak / 1e9:.1f} GFLOP/s"
    )
    if device.type == "cpu":
        what += (
            " (CPU: MFU is shown for completeness; a shared CPU's peak is not a stable reference)"
        )
    return peak, what


def mfu_line(label: str, tokens_per_s: float, flops_per_token: float, peak: float) -> str:
    from polymnesia.training.flops import mfu

    achieved = tokens_per_s * flops_per_token
    return (
        f"{label}: {achieved / 1e9:.2f} GFLOP/s of model FLOPs, MFU "
        f"{100 * mfu(tokens_per_s, flops_per_token, peak):.1f}%"
    )


def timed_cli_run(
    config: str,
    extra: list[str],
    tmp: Path,
    name: str,
    user_cache: Path,
    env: dict[str, str] | None = None,
) -> float:
    """Seconds of one ``polymnesia run CONFIG EXTRA`` as a whole process, in a stage cache of
    its own under ``tmp`` that links the user cache's Bible download; the run folder is
    ``tmp/NAME``. The command's output tails end the benchmark if it fails."""
    cache = tmp / f"cache-{name}"
    (cache / "data").mkdir(parents=True)
    (cache / "data" / "bible").symlink_to(user_cache / "data" / "bible")
    cmd = [sys.executable, "-m", "polymnesia", "run", config, "--run-dir", str(tmp / name)]
    start = time.perf_counter()
    out = subprocess.run(
        [*cmd, *extra],
        env={**os.environ, "POLYMNESIA_CACHE": str(cache), **(env or {})},
        capture_output=True,
        text=True,
    )
    if out.returncode:
        sys.exit(out.stdout[-2000:] + out.stderr[-2000:])
    return time.perf_counter() - start

"""Learning-rate schedules as pure functions of the step."""

from __future__ import annotations

import math


def warmup_cosine(step: int, *, warmup: int, total: int, min_ratio: float = 0.0) -> float:
    """Multiplier of the peak learning rate at optimizer step ``step`` (0-based).

    Linear warmup from 1/warmup to 1 over ``warmup`` steps, then cosine decay to
    ``min_ratio`` at ``total`` (the schedule of Tables 4-5 in Aggarwal et al. 2024).
    """
    if warmup > 0 and step < warmup:
        return (step + 1) / warmup
    if total <= warmup:
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def windowed(step: int, *, window: int, warmup: int, total: int, min_ratio: float = 0.0) -> float:
    """The warmup-cosine schedule replayed inside each ``window``-step window.

    Used for the token embeddings under active forgetting: the reference code
    (Chen et al. 2023) restarts the embeddings' schedule after every reset.
    """
    return warmup_cosine(
        step % window, warmup=warmup, total=min(window, total), min_ratio=min_ratio
    )

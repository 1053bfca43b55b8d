"""Is a finished training run healthy? Pure checks on its loss curve.

Two failure shapes pass silently as "success" if nobody looks at the curve:

- *diverged*: the loss ends well above where it started (the learning rate
  is too high, the run blew up without ever producing a NaN);
- *stuck at chance*: the loss sits flat at the loss of a uniform prediction,
  ``ln(V)`` for a language model with ``V`` output classes (a dead model:
  after an explosion the weights collapse and every token gets the same
  probability).

:func:`assess` flags both; the loop writes the result to
``train_health.json`` next to ``metrics.jsonl`` and prints a warning.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

#: the final loss counts as diverged above ``start * (1 + RISE) + RISE_ABS``
RISE = 0.10
RISE_ABS = 0.05
#: "at chance": within ``CHANCE_TOL * ln(V)`` of ``ln(V)`` ...
CHANCE_TOL = 0.02
#: ... for the last ``FLAT_WINDOW`` steps (needs at least ``MIN_STEPS`` steps in all)
FLAT_WINDOW = 10
MIN_STEPS = 20
#: how many recent losses the loop keeps for :func:`assess`
HISTORY = 50


def chance_loss(model: Any) -> float | None:
    """``ln(V)`` for a model with ``V`` output classes (vocabulary or labels); None if unknown."""
    out = getattr(model, "get_output_embeddings", lambda: None)()
    weight = getattr(out, "weight", None)
    if weight is not None and weight.ndim == 2:
        return math.log(int(weight.shape[0]))
    n = getattr(getattr(model, "config", None), "num_labels", None)
    return math.log(n) if isinstance(n, int) and n > 1 else None


def assess(
    first_loss: float, recent: Sequence[float], steps: int, chance: float | None
) -> dict[str, Any]:
    """Flags for a loss curve: ``first_loss`` at step 1, ``recent`` the last losses (oldest
    first).
    """
    flags: list[str] = []
    warnings: list[str] = []
    final = sum(recent[-3:]) / len(recent[-3:]) if recent else float("nan")
    if recent and math.isfinite(first_loss) and final > first_loss * (1 + RISE) + RISE_ABS:
        flags.append("diverged")
        warnings.append(
            f"training diverged: the loss rose from {first_loss:.4g} at step 1 to {final:.4g} "
            "at the end; lower train.lr or raise train.warmup_ratio"
        )
    window = list(recent[-FLAT_WINDOW:])
    if (
        chance is not None
        and steps >= MIN_STEPS
        and len(window) >= min(FLAT_WINDOW, steps // 2)
        and all(abs(x - chance) <= CHANCE_TOL * chance for x in window)
    ):
        flags.append("stuck_at_chance")
        warnings.append(
            f"the loss sat at {final:.4g} = ln(V) = {chance:.4g} (a uniform prediction) for the "
            f"last {len(window)} steps: the model predicts nothing; check train.lr and the data"
        )
    return {
        "first_loss": first_loss,
        "final_loss": final,
        "chance_loss": chance,
        "flags": flags,
        "diverged": bool(flags),
        "warnings": warnings,
    }

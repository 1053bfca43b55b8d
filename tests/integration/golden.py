"""Seeded smoke runs must keep their scores: compare a run's scores with a golden file.

The golden files in ``tests/golden/`` were recorded from the smoke configs before the
protocol layer was restructured (and must be re-recorded, with a changelog line, only when a
change is *meant* to change the numbers): ``python tests/integration/golden.py RUN_DIR NAME``.
Each metric is compared within what its computation reproduces across CPUs and kernel
paths (:data:`TOLERANCES`; the reasons are in ``tests/golden/README.md``).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
KEY = ("model", "lang", "metric", "task", "group", "size", "seed", "step", "setting")
#: (relative, absolute) tolerance of every metric not named in TOLERANCES
DEFAULT_TOLERANCE = (1e-6, 1e-9)
#: metrics whose computation amplifies float32 rounding beyond the default (see README.md)
TOLERANCES: dict[str, tuple[float, float]] = {
    # ||Sigma_1 - Sigma_2|| of two close models: a difference of near-equal covariances turns
    # the float32 activations' cross-CPU rounding (~1e-7 relative) into up to ~75x that
    "covariance_drift": (1e-4, 1e-9),
    "layer_covariance_drift": (1e-4, 1e-9),
}


def _key(rec: dict[str, Any]) -> str:
    return json.dumps([rec.get(k) for k in KEY])


def score_table(run_dir: Path) -> dict[str, float]:
    """``{key: value}`` of a run folder's ``results/scores.jsonl`` (run-time records left out)."""
    out: dict[str, float] = {}
    for line in (run_dir / "results" / "scores.jsonl").read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if "seconds" in str(rec.get("metric")):
            continue
        out[_key(rec)] = float(rec["value"])
    return out


def record(run_dir: Path, name: str) -> Path:
    path = GOLDEN / f"{name}.json"
    path.write_text(json.dumps(score_table(run_dir), indent=0, sort_keys=True) + "\n")
    return path


def tolerance(key: str, floor: tuple[float, float] | None = None) -> tuple[float, float]:
    """The (relative, absolute) tolerance of a golden key's metric, at least ``floor``."""
    rel, abs_ = TOLERANCES.get(json.loads(key)[KEY.index("metric")], DEFAULT_TOLERANCE)
    return (max(rel, floor[0]), max(abs_, floor[1])) if floor else (rel, abs_)


def compare(
    want: dict[str, float],
    got: dict[str, float],
    *,
    subset: bool = False,
    floor: tuple[float, float] | None = None,
) -> list[str]:
    """Lines naming each score of ``got`` that differs from (or is missing in) ``want``."""
    out = [] if subset else [f"missing {k}" for k in want if k not in got]
    out += [f"unexpected {k}" for k in got if k not in want]
    for k, v in want.items():
        g = got.get(k)
        if g is None or (math.isnan(v) and math.isnan(g)):
            continue
        rel, abs_ = tolerance(k, floor)
        if not math.isclose(g, v, rel_tol=rel, abs_tol=abs_):
            out.append(f"{k}: {g!r} != golden {v!r} (tolerance {rel:g} relative)")
    return out


def golden_keys(name: str) -> list[str]:
    """The keys of a golden file."""
    return list(json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8")))


def mismatches(
    run_dir: Path, name: str, *, subset: bool = False, rel: float = 0.0, abs_: float = 0.0
) -> list[str]:
    """Lines naming each score that differs from (or is missing in) the golden file; with
    ``subset`` the run may hold fewer scores (a run of fewer arms of the same config).
    ``rel``/``abs_`` raise every metric's tolerance to at least that (GPU kernels)."""
    want = json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    return compare(want, score_table(run_dir), subset=subset, floor=(rel, abs_))


if __name__ == "__main__":
    print(record(Path(sys.argv[1]), sys.argv[2]))

"""Seeded smoke runs must keep their scores: compare a run's scores with a golden file.

The golden files in ``tests/golden/`` were recorded from the smoke configs before the
protocol layer was restructured (and must be re-recorded, with a changelog line, only when a
change is *meant* to change the numbers): ``python tests/integration/golden.py RUN_DIR NAME``.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
KEY = ("model", "lang", "metric", "task", "group", "size", "seed", "step", "setting")


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


def mismatches(
    run_dir: Path, name: str, *, subset: bool = False, rel: float = 1e-6, abs_: float = 1e-9
) -> list[str]:
    """Lines naming each score that differs from (or is missing in) the golden file; with
    ``subset`` the run may hold fewer scores (a run of fewer arms of the same config)."""
    want = json.loads((GOLDEN / f"{name}.json").read_text(encoding="utf-8"))
    got = score_table(run_dir)
    out = [] if subset else [f"missing {k}" for k in want if k not in got]
    out += [f"unexpected {k}" for k in got if k not in want]
    for k, v in want.items():
        g = got.get(k)
        if g is not None and not (
            (math.isnan(v) and math.isnan(g)) or math.isclose(g, v, rel_tol=rel, abs_tol=abs_)
        ):
            out.append(f"{k}: {g!r} != golden {v!r}")
    return out


if __name__ == "__main__":
    print(record(Path(sys.argv[1]), sys.argv[2]))

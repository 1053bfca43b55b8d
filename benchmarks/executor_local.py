"""``--executor local --jobs N`` against the inline executor on one config, side by side.

    python benchmarks/executor_local.py [CONFIG] [--jobs N] [--rounds R] [key=value ...]

Each round runs the config twice from an empty stage cache (the Bible linked in, so the
download is not timed), once inline and once with ``--executor local``, in alternating order.
It prints each side's wall time and their ratio, the local side's children (their number,
summed and longest wall time) and the time the stages themselves took inline (from their
cache entries): what the children spend beyond that is process start-up and two children
sharing the cores. On a machine whose cores the inline run already uses, CPU training bounds
the ratio near 1 at best. Default: the forgetting baselines
of lifelong (six independent chains after pretraining).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import timed_cli_run

ROOT = Path(__file__).resolve().parents[1]


def _children(run: Path) -> dict[str, float]:
    """Each child of the local run (by its log file) and its wall time in seconds."""
    stages = json.loads((run / "run.json").read_text())["stages"]
    return {s["log"]: float(s["seconds"]) for s in stages.values() if "log" in s}


def _stage_seconds(run: Path) -> float:
    """The summed build time of the run's stages as their entries recorded it (the time
    inside each stage, without any process start-up)."""
    stages = json.loads((run / "run.json").read_text())["stages"]
    total = 0.0
    for info in stages.values():
        marker = Path(info["entry"]) / "_complete.json"
        total += float(json.loads(marker.read_text()).get("seconds", 0.0))
    return total


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("config", nargs="?", default=str(ROOT / "configs" / "lifelong_baselines.yaml"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    args, overrides = ap.parse_known_args()
    from polymnesia.paths import cache_dir

    subprocess.run(
        [sys.executable, "-m", "polymnesia", "data", "fetch", "bible"],
        check=True,
        capture_output=True,
    )
    local = ["--executor", "local", "--jobs", str(args.jobs)]
    print(f"config {args.config}, --jobs {args.jobs}, {os.cpu_count()} CPU cores")
    for r in range(args.rounds):
        with tempfile.TemporaryDirectory() as t:
            tmp = Path(t)
            order = ["inline", "local"] if r % 2 == 0 else ["local", "inline"]
            wall = {}
            for side in order:
                extra = [*overrides, *(local if side == "local" else [])]
                wall[side] = timed_cli_run(args.config, extra, tmp, side, cache_dir())
            children = _children(tmp / "local")
            inside = _stage_seconds(tmp / "inline")
            summed = sum(children.values())
            print(
                f"round {r}: inline {wall['inline']:7.1f} s   local {wall['local']:7.1f} s   "
                f"ratio local/inline {wall['local'] / wall['inline']:.2f}   "
                f"{len(children)} children, {summed:.1f} s summed, longest "
                f"{max(children.values()):.1f} s; the stages themselves {inside:.1f} s inline, "
                f"so about {(summed - inside) / max(1, len(children)):.1f} s of start-up and "
                "contention per child"
            )


if __name__ == "__main__":
    main()

"""``--executor local --jobs N`` against the inline executor on one config, side by side.

    python benchmarks/executor_local.py [CONFIG] [--jobs N] [--rounds R] [key=value ...]

Each round runs the config twice from an empty stage cache (the Bible linked in, so the
download is not timed), once inline and once with ``--executor local``, in alternating order.
It prints each side's wall time, their ratio, and for the local side the sum of its children's
stage times and the longest chain of the graph (the critical path, from the children's own
times): the ratio cannot beat ``critical path / sum of stages``, and on a machine whose cores
the inline run already uses, CPU training bounds it near 1. Default: the forgetting baselines
of lifelong (six independent chains after pretraining).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(config: str, extra: list[str], tmp: Path, name: str, user_cache: Path) -> float:
    cache = tmp / f"cache-{name}"
    (cache / "data").mkdir(parents=True)
    (cache / "data" / "bible").symlink_to(user_cache / "data" / "bible")
    cmd = [sys.executable, "-m", "polymnesia", "run", config, "--run-dir", str(tmp / name)]
    start = time.perf_counter()
    out = subprocess.run(
        [*cmd, *extra],
        env={**os.environ, "POLYMNESIA_CACHE": str(cache)},
        capture_output=True,
        text=True,
    )
    if out.returncode:
        sys.exit(out.stdout[-2000:] + out.stderr[-2000:])
    return time.perf_counter() - start


def _critical_path(config: str, overrides: list[str], run: Path) -> tuple[float, float]:
    """The sum of the children's stage times and the longest chain of stages (seconds), the
    chains those of the config's own stage graph."""
    from polymnesia.experiments import EXPERIMENTS, load_config
    from polymnesia.experiments.preflight import build_specs

    cfg = load_config(config, overrides)
    specs = build_specs(EXPERIMENTS.get(cfg.experiment), cfg, config)
    inputs = {s.name: list(s.inputs.values()) for s in specs}
    stages = json.loads((run / "run.json").read_text())["stages"]
    seconds = {n: float(s.get("seconds", 0.0)) for n, s in stages.items()}
    return sum(seconds.values()), _longest(stages, seconds, inputs)


def _longest(
    stages: dict[str, object], seconds: dict[str, float], inputs: dict[str, list[str]]
) -> float:
    memo: dict[str, float] = {}

    def finish(name: str) -> float:
        if name not in memo:
            memo[name] = seconds[name] + max((finish(u) for u in inputs[name]), default=0.0)
        return memo[name]

    return max((finish(n) for n in stages), default=0.0)


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
                wall[side] = _run(args.config, extra, tmp, side, cache_dir())
            total, path = _critical_path(args.config, overrides, tmp / "local")
            print(
                f"round {r}: inline {wall['inline']:7.1f} s   local {wall['local']:7.1f} s   "
                f"ratio local/inline {wall['local'] / wall['inline']:.2f}   "
                f"children's stages {total:7.1f} s, longest chain {path:7.1f} s "
                f"(bound {path / max(total, 1e-9):.2f})"
            )


if __name__ == "__main__":
    main()

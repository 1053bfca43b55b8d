"""Wall time per stage of a two_phase run and the share spent in evaluation (paper 002).

Run: ``python benchmarks/two_phase.py [CONFIG] [--run-dir DIR] [--reuse]``. Without
``--reuse`` the config (default ``configs/two_phase.yaml``) runs from an empty stage cache
(the Bible download is reused from the user's cache), so every stage really runs; with
``--reuse`` an existing ``--run-dir`` is read as it is. The time of each stage is the one the
runner recorded in the stage's completion marker; stages are grouped into data
(prepare_data, instruction_data, replay_data), training (train_tokenizer, pretrain, instruct,
import_model), evaluation (evaluate_harness) and analysis (dataset_similarity,
model_distance, representation_drift).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

GROUPS = {
    "prepare_data": "data",
    "instruction_data": "data",
    "replay_data": "data",
    "train_tokenizer": "training",
    "pretrain": "training",
    "instruct": "training",
    "import_model": "training",
    "evaluate_harness": "evaluation",
    "dataset_similarity": "analysis",
    "model_distance": "analysis",
    "representation_drift": "analysis",
}


def stage_seconds(run_dir: Path) -> list[tuple[str, str, float]]:
    """``(stage, kind, seconds)`` of every stage of a run folder, from the cache markers."""
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    out = []
    for name, st in run["stages"].items():
        marker = Path(st["entry"]) / "_complete.json"
        seconds = json.loads(marker.read_text(encoding="utf-8")).get("seconds", float("nan"))
        out.append((name, st["kind"], float(seconds)))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", default="configs/two_phase.yaml")
    ap.add_argument("--run-dir", default=None)
    ap.add_argument("--reuse", action="store_true", help="read --run-dir as it is")
    args = ap.parse_args()
    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="two-phase-bench-"))
    if not args.reuse:
        cache = Path(tempfile.mkdtemp(prefix="two-phase-cache-"))
        bible = Path(os.environ.get("POLYMNESIA_CACHE", Path.home() / ".cache" / "polymnesia"))
        (cache / "data").mkdir(parents=True)
        if (bible / "data" / "bible").exists():
            (cache / "data" / "bible").symlink_to(bible / "data" / "bible")
        env = {**os.environ, "POLYMNESIA_CACHE": str(cache)}
        t0 = time.time()
        cmd = [sys.executable, "-m", "polymnesia", "run", args.config, "--run-dir", str(run_dir)]
        subprocess.run(cmd, env=env, check=True)
        print(f"wall time of the whole run: {time.time() - t0:.0f} s")
    rows = stage_seconds(run_dir)
    by_group: dict[str, float] = defaultdict(float)
    print(f"{'stage':36s} {'kind':22s} {'seconds':>9s}")
    for name, kind, sec in sorted(rows, key=lambda r: -r[2]):
        print(f"{name:36s} {kind:22s} {sec:9.1f}")
        by_group[GROUPS.get(kind, "other")] += sec
    total = sum(by_group.values())
    print()
    for group, sec in sorted(by_group.items(), key=lambda kv: -kv[1]):
        print(f"{group:12s} {sec:8.1f} s  {sec / total:6.1%}")
    train = by_group.get("training", 0.0)
    ev = by_group.get("evaluation", 0.0)
    print(f"\nevaluation / training time: {ev / train:.2f}x" if train else "")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

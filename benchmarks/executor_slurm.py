"""Per-stage overhead of ``--executor slurm`` against the inline executor, on a SLURM cluster.

    SLURM_CONF=... python benchmarks/executor_slurm.py [CONFIG] [key=value ...]

Runs the config twice from an empty stage cache (the Bible linked in, so its download is not
timed): inline, then with ``--executor slurm`` (``cluster.poll_s=0.5`` unless given). For
every stage that takes inputs it measures the gap from "its inputs are complete" (the last
``_complete.json`` of the entries it reads is written) to "its work starts" (its own
``spec.json`` is written, just before the stage runs), in each run. On the slurm side the
stages that start a job pay the driver's poll, ``sbatch``, the queue, the job's start and two
Python start-ups (submitit's and ``polymnesia run --stage``); the queue wait (submitted to
running, as the driver saw it, so to ``poll_s``) is printed apart. Each job start is split
at submitit's first log line: submission to the job's Python running, then the job's Python
(imports, config, plan, checks of the inputs) to the work. Stages chained into a job pay what
they pay inline. Default config: lifelong's smoke config, shrunk as the executors'
tests shrink it (7 jobs).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import datetime
from pathlib import Path

from _common import timed_cli_run

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["methods=[vanilla,ewc]", "orders=[{name: resource, kind: resource}]"]


def _run_one(config: str, extra: list[str], tmp: Path, name: str, user_cache: Path) -> float:
    return timed_cli_run(config, extra, tmp, name, user_cache, {"OMP_NUM_THREADS": "1"})


def _gaps(run: Path, inputs: dict[str, list[str]]) -> dict[str, float]:
    """Each stage with inputs -> seconds from its last input's completion to its start."""
    entries = {
        n: Path(s["entry"]) for n, s in json.loads((run / "run.json").read_text())["stages"].items()
    }
    out = {}
    for name, ups in inputs.items():
        if ups:
            ready = max((entries[u] / "_complete.json").stat().st_mtime for u in ups)
            out[name] = (entries[name] / "spec.json").stat().st_mtime - ready
    return out


def _job_started(log: Path) -> float:
    """When the job's Python started its work: submitit's first log line's time."""
    first = log.read_text().splitlines()[0]  # submitit INFO (2026-12-02 16:25:58,738) - ...
    stamp = first.split("(", 1)[1].split(")", 1)[0]
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").timestamp()


def main() -> None:
    config = str(ROOT / "configs" / "lifelong_smoke.yaml")
    args = sys.argv[1:]
    if args and "=" not in args[0]:
        config, args = args[0], args[1:]
    overrides = args or SMALL
    from polymnesia.experiments import EXPERIMENTS, load_config
    from polymnesia.experiments.preflight import build_specs
    from polymnesia.paths import cache_dir

    cfg = load_config(config, overrides)
    specs = build_specs(EXPERIMENTS.get(cfg.experiment), cfg, config)
    inputs = {s.name: sorted(set(s.inputs.values())) for s in specs}
    subprocess.run(
        [sys.executable, "-m", "polymnesia", "data", "fetch", "bible"],
        check=True,
        capture_output=True,
    )
    poll = [] if any(o.startswith("cluster.poll_s=") for o in overrides) else ["cluster.poll_s=0.5"]
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_TMP")) as t:
        tmp = Path(t)
        wall = {
            "inline": _run_one(config, overrides, tmp, "inline", cache_dir()),
            "slurm": _run_one(
                config, [*overrides, *poll, "--executor", "slurm"], tmp, "slurm", cache_dir()
            ),
        }
        inline, slurm = _gaps(tmp / "inline", inputs), _gaps(tmp / "slurm", inputs)
        board = json.loads((tmp / "slurm" / "logs" / "executor.json").read_text())["stages"]
        firsts = [n for n in slurm if Path(board[n]["log"]).parent.name == n]
        chained = [n for n in slurm if n not in firsts]
        queue = {n: board[n]["started"] - board[n]["submitted"] for n in firsts}
        # from submission to submitit's process running in the job, and from there to work
        to_job = {n: _job_started(Path(board[n]["log"])) - board[n]["submitted"] for n in firsts}
        in_job = {
            n: (
                Path(json.loads((tmp / "slurm" / "run.json").read_text())["stages"][n]["entry"])
                / "spec.json"
            )
            .stat()
            .st_mtime
            - _job_started(Path(board[n]["log"]))
            for n in firsts
        }
        print(f"config {config} {' '.join(overrides)}, {os.cpu_count()} CPU cores")
        print(f"wall: inline {wall['inline']:.1f} s, slurm {wall['slurm']:.1f} s")
        print(
            f"inline gap, inputs complete -> work starts: median "
            f"{statistics.median(inline.values()):.2f} s over {len(inline)} stages"
        )
        for n in firsts:
            print(
                f"  job start {n:24s} gap {slurm[n]:6.2f} s  queue wait {queue[n]:5.1f} s  "
                f"other {slurm[n] - queue[n]:6.2f} s  (submit -> job's Python {to_job[n]:5.1f} s, "
                f"job's Python -> work {in_job[n]:5.1f} s; inline {inline[n]:.2f} s)"
            )
        for n in chained:
            print(f"  chained   {n:24s} gap {slurm[n]:6.2f} s   (inline {inline[n]:.2f} s)")
        other = [slurm[n] - queue[n] for n in firsts]
        print(
            f"slurm job starts: median gap {statistics.median(slurm[n] for n in firsts):.2f} s,"
            f" median without the queue wait {statistics.median(other):.2f} s "
            f"(max {max(other):.2f} s); chained stages median "
            f"{statistics.median(slurm[n] for n in chained) if chained else float('nan'):.2f} s; "
            f"median job's Python -> work {statistics.median(in_job.values()):.2f} s"
        )


if __name__ == "__main__":
    main()

"""Simulated cluster (issue 43): how long a config's stage graph takes laid out on a cluster
by ``polymnesia plan --schedule``, against the same stages one at a time, from the planner's
estimates (memory plan for each stage's GPU count, model FLOPs at an assumed utilisation for
its time). Goal: at most 0.35x for ``two_phase_paper.yaml`` with 3 seeds on 4 nodes x 8 GPUs.

    python benchmarks/cluster_schedule.py                       # that case
    python benchmarks/cluster_schedule.py --config configs/lifelong_paper.yaml --seeds 0
    python benchmarks/cluster_schedule.py --cluster 2x8 --mfu 0.3

Pure arithmetic on the config: nothing is downloaded, trained or submitted. The estimate
leaves out queue waits and job start-up (measured in docs/benchmarks.md, "slurm executor").
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import sys

from polymnesia.cli.main import main as cli


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="configs/two_phase_paper.yaml")
    ap.add_argument("--seeds", default="0,1,2", help="training seeds (comma-separated)")
    ap.add_argument("--cluster", default="4x8", help="NODESxGPUS")
    ap.add_argument("--memory", default="80GB", help="memory per GPU")
    ap.add_argument("--mfu", default="0.4")
    args = ap.parse_args()
    seeds = [s for s in args.seeds.split(",") if s]
    override = [f"seeds=[{','.join(seeds)}]"] if len(seeds) > 1 else [f"seed={seeds[0]}"]
    os.environ.setdefault("HF_HUB_OFFLINE", "0")  # (a plan reads lm-eval's task index only)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = cli(
            ["plan", args.config, *override, "--memory", args.memory]
            + ["--schedule", args.cluster, "--mfu", args.mfu]
        )
    text = out.getvalue()
    if code != 0:
        sys.stdout.write(text)
        return code
    rows = text.split("\n# schedule on ", 1)[1].splitlines()
    jobs = [r for r in rows[2:] if r and not r.startswith("#")]
    trained = [r for r in jobs if int(r.split()[1]) > 1]
    print(f"config {args.config}, seeds {args.seeds}, cluster {args.cluster}, mfu {args.mfu}")
    print(f"stages: {len(jobs)} ({len(trained)} on more than one GPU)")
    print(rows[-1].lstrip("# "))
    return 0


if __name__ == "__main__":
    sys.exit(main())

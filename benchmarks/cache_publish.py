"""The stage cache's cost: entries built in private folders and published by rename, under the
lock files (issue 43, item 2), against the code before, which built entries in place under flock.

    python benchmarks/cache_publish.py [--before REV] [--rounds R] [--stages N] [key=value ...]

The code before (``REV``, default ``1e2d7ad``: the commit this work started from) is unpacked
from git into a temporary folder; the code after is this checkout's ``src``. Each round runs
both sides, in alternating order, each in a fresh process and an empty cache:

1. ``N`` trivial stages (each writes one small file and one score): the wall time of
   ``run_pipeline`` divided by ``N`` is what the cache costs per stage (plan, lock, build
   folder, marker with its manifest, publish, run record), with nothing else to hide it;
2. the quickstart shrunk to seconds (the overrides of ``tests/integration/smoke.py``, plus any
   ``key=value`` given): the wall time of the whole ``polymnesia run``.

It prints each side's medians and the ratio after / before of each, with its range over the
rounds.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from smoke import SMOKE  # noqa: E402

TRIVIAL = r"""
import sys, time
from pathlib import Path
from polymnesia.config.base import StrictModel
from polymnesia.io import atomic_write_text
from polymnesia.pipeline.runner import run_pipeline
from polymnesia.pipeline.stage import STAGES, Stage, StageSpec
from polymnesia.results import Score

class P(StrictModel):
    i: int

@STAGES.register("bench_trivial", "writes one file (benchmark)")
class Trivial(Stage[P]):
    def run(self, ctx):
        atomic_write_text(ctx.out_dir / "value.txt", str(ctx.params.i))
        return [Score("m", "en", "value", float(ctx.params.i))]

STAGES._loaded = True  # the trivial stage alone: torch and the shipped stages stay out
from polymnesia.runtime import partial_state
partial_state()  # Accelerate's import and process state, outside the timed window
n = int(sys.argv[1])
specs = [StageSpec(f"s{i}", "bench_trivial", P(i=i)) for i in range(n)]
start = time.perf_counter()
run_pipeline(specs, None, log=lambda m: None)
print(time.perf_counter() - start)
"""


def _unpack(rev: str, into: Path) -> Path:
    blob = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def _env(src: Path, cache: Path) -> dict[str, str]:
    (cache / "data").mkdir(parents=True)
    user = Path(os.environ.get("POLYMNESIA_CACHE", Path.home() / ".cache" / "polymnesia"))
    if (user / "data" / "bible").exists():
        (cache / "data" / "bible").symlink_to(user / "data" / "bible")
    return {**os.environ, "PYTHONPATH": str(src), "POLYMNESIA_CACHE": str(cache)}


def _check(out: subprocess.CompletedProcess[str]) -> None:
    if out.returncode:
        sys.exit(out.stdout[-2000:] + out.stderr[-2000:])


def trivial(src: Path, cache: Path, n: int) -> float:
    """Seconds per stage of ``n`` trivial stages."""
    cmd = [sys.executable, "-c", TRIVIAL, str(n)]
    out = subprocess.run(cmd, env=_env(src, cache), capture_output=True, text=True)
    _check(out)
    return float(out.stdout.split()[-1]) / n


def quickstart(src: Path, cache: Path, run_dir: Path, extra: list[str]) -> float:
    config = str(ROOT / "configs" / "quickstart.yaml")
    cmd = [sys.executable, "-m", "polymnesia", "run", config, *SMOKE, *extra]
    start = time.perf_counter()
    out = subprocess.run(
        [*cmd, "--run-dir", str(run_dir)], env=_env(src, cache), capture_output=True, text=True
    )
    _check(out)
    return time.perf_counter() - start


def _summary(name: str, before: list[float], after: list[float], unit: str, scale: float) -> None:
    ratios = [a / b for a, b in zip(after, before, strict=True)]
    print(
        f"{name}: before {statistics.median(before) * scale:.2f} {unit}, "
        f"after {statistics.median(after) * scale:.2f} {unit}; after/before "
        f"{statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}, "
        f"{len(ratios)} rounds)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="1e2d7ad", help="git revision of the code before")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--stages", type=int, default=200, help="trivial stages per round")
    ap.add_argument("--no-quickstart", action="store_true", help="the trivial stages only")
    ap.add_argument("overrides", nargs="*", help="key=value for the quickstart")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cache-publish-") as name:
        tmp = Path(name)
        sides = {"before": _unpack(args.before, tmp / "before"), "after": ROOT / "src"}
        per_stage: dict[str, list[float]] = {"before": [], "after": []}
        whole: dict[str, list[float]] = {"before": [], "after": []}
        for r in range(args.rounds):
            order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
            for side in order:
                per_stage[side].append(trivial(sides[side], tmp / f"t-{side}-{r}", args.stages))
                if not args.no_quickstart:
                    whole[side].append(
                        quickstart(
                            sides[side],
                            tmp / f"q-{side}-{r}",
                            tmp / f"run-{side}-{r}",
                            args.overrides,
                        )
                    )
            print(
                f"round {r + 1}: per stage before {per_stage['before'][-1] * 1e3:.2f} ms, "
                f"after {per_stage['after'][-1] * 1e3:.2f} ms"
                + (
                    f"; quickstart before {whole['before'][-1]:.1f} s, "
                    f"after {whole['after'][-1]:.1f} s"
                    if whole["after"]
                    else ""
                ),
                flush=True,
            )
        print(f"before: {args.before}; after: this checkout; load average {os.getloadavg()[0]:.1f}")
        _summary(
            f"{args.stages} trivial stages, per stage",
            per_stage["before"],
            per_stage["after"],
            "ms",
            1e3,
        )
        if whole["after"]:
            _summary("quickstart smoke, whole run", whole["before"], whole["after"], "s", 1.0)


if __name__ == "__main__":
    main()

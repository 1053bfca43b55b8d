"""Wall time and peak memory (RSS of the process tree) of the quickstart, in a fresh cache.

    python benchmarks/quickstart.py [--keep-cache] [extra key=value overrides]

The Bible database is fetched once into the user's cache and linked into the
fresh cache, so the figure is the experiment itself (data preparation,
tokenizer, pretraining, evaluation, report). Goals: under 5 minutes, under 2 GB.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    from polymnesia.paths import cache_dir

    overrides = [a for a in sys.argv[1:] if "=" in a]
    user_cache = cache_dir()
    subprocess.run(
        [sys.executable, "-m", "polymnesia", "data", "fetch", "bible"],
        check=True,
        capture_output=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp) / "cache"
        (cache / "data").mkdir(parents=True)
        (cache / "data" / "bible").symlink_to(user_cache / "data" / "bible")
        env = {**os.environ, "POLYMNESIA_CACHE": str(cache)}
        start = time.perf_counter()
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "polymnesia",
                "run",
                str(ROOT / "configs" / "quickstart.yaml"),
                *overrides,
                "train.progress_bar=false",
                "--run-dir",
                str(Path(tmp) / "run"),
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        wall = time.perf_counter() - start
        if out.returncode:
            sys.exit(out.stderr[-2000:])
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"quickstart wall time : {wall:7.1f} s   (goal < 300 s, ratio {wall / 300:.2f})")
    print(f"quickstart peak RSS  : {peak_mb:7.0f} MB  (goal < 2048 MB, ratio {peak_mb / 2048:.2f})")


if __name__ == "__main__":
    main()

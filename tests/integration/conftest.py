"""Fixtures of the end-to-end tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: lifelong_smoke shrunk to two methods and one order: the executors' end-to-end config
LIFELONG_SMOKE = str(Path(__file__).resolve().parents[2] / "configs" / "lifelong_smoke.yaml")
SMALL_LIFELONG = ["methods=[vanilla,ewc]", "orders=[{name: resource, kind: resource}]"]


@pytest.fixture(scope="session")
def small_lifelong_inline(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(run folder, stage cache) of the inline run of the shrunk lifelong_smoke config, made
    once per session from an empty cache: the reference every executor's run is compared
    with (local, partial, slurm, re-attached). Tests read it; none writes into it."""
    from polymnesia.paths import cache_dir

    root = tmp_path_factory.mktemp("small-lifelong-inline")
    run, cache = root / "inline", root / "cache-inline"
    bible = cache_dir() / "data" / "bible"
    if bible.exists():  # the download is shared, not timed
        (cache / "data").mkdir(parents=True)
        (cache / "data" / "bible").symlink_to(bible)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "POLYMNESIA_CACHE": str(cache)}
    cmd = [sys.executable, "-m", "polymnesia", "run", LIFELONG_SMOKE, *SMALL_LIFELONG]
    res = subprocess.run(
        [*cmd, "--run-dir", str(run)], env=env, capture_output=True, text=True, timeout=1200
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return run, cache

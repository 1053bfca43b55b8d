"""Two ``polymnesia run`` processes on one stage cache build each entry once (issue 43, item 2)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from smoke import SMOKE

from polymnesia.io import read_jsonl

pytestmark = pytest.mark.integration
CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml")
BUILT = re.compile(r"^\[polymnesia\] (?:run|resume) +(\S+) \(")


def test_two_runs_on_one_cache_build_each_entry_once_and_agree(
    isolated_cache: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "POLYMNESIA_CACHE": str(isolated_cache), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "polymnesia", "run", CONFIG, *SMOKE, "--run-dir"]
    runs = [
        subprocess.Popen(
            [*cmd, str(tmp_path / name)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    outs = [r.communicate(timeout=600) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], [err[-2000:] for _, err in outs]
    built = Counter(
        m.group(1) for out, _ in outs for line in out.splitlines() if (m := BUILT.match(line))
    )
    assert set(built) == {"data", "tokenizer", "pretrain", "evaluate"}, outs
    assert all(n == 1 for n in built.values()), built  # the other run reused each one
    a, b = (read_jsonl(tmp_path / n / "results" / "scores.jsonl") for n in ("a", "b"))
    assert a == b and a
    verify = subprocess.run(
        [sys.executable, "-m", "polymnesia", "cache", "verify"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
    stages = isolated_cache / "stages"
    leftovers = [p.name for p in stages.glob("*/.*") if ".build-" in p.name or "trash" in p.name]
    assert leftovers == []


def test_two_slurm_drivers_on_one_cache_build_each_entry_once(
    slurm_cluster: Any, isolated_cache: Path, tmp_path: Path
) -> None:
    """The same with ``--executor slurm``: each driver submits its own job for the chain of
    four stages; the two jobs run side by side on the one-node cluster and meet only in the
    cache, where each entry is built by one of them and reused by the other."""
    env = {**os.environ, "POLYMNESIA_CACHE": str(isolated_cache), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "polymnesia", "run", CONFIG, *SMOKE, "cluster.poll_s=0.5"]
    cmd += ["--executor", "slurm", "--run-dir"]
    runs = [
        subprocess.Popen(
            [*cmd, str(tmp_path / name)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name in ("a", "b")
    ]
    outs = [r.communicate(timeout=900)[0] for r in runs]
    assert [r.returncode for r in runs] == [0, 0], [out[-2000:] for out in outs]
    assert all("[polymnesia] submit data" in out for out in outs), outs  # one job each
    logs = [p.read_text() for n in ("a", "b") for p in (tmp_path / n / "logs").rglob("*.out")]
    built = Counter(m.group(1) for log in logs for x in log.splitlines() if (m := BUILT.match(x)))
    assert set(built) == {"data", "tokenizer", "pretrain", "evaluate"}, logs
    assert all(n == 1 for n in built.values()), built
    a, b = (read_jsonl(tmp_path / n / "results" / "scores.jsonl") for n in ("a", "b"))
    assert a == b and a

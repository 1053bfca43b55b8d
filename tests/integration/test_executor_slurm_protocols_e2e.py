"""Every protocol's smoke config, shrunk to seconds, through ``--executor slurm`` on the
one-node cluster gives the inline run's scores, items and report (lifelong's is
test_executor_slurm_e2e.py, language_modeling's the quickstart of
test_executor_slurm_cancel_e2e.py). Each run starts from an empty stage cache of its own; the
Bible download is shared."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_executor_local_e2e import TIMED, _rows, _sections

pytestmark = pytest.mark.integration
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
#: (config, overrides shrinking it to few jobs): one per protocol; two_phase keeps its LoRA
#: arm, whose adapter once depended on what the process had drawn before (inline differed)
PROTOCOLS = {
    "active_forgetting": (
        "active_forgetting_smoke.yaml",
        ["pretrain.steps=8", "adapt.train.steps=2", "instruct.train.steps=2"],
    ),
    "new_token_init": ("new_token_init_smoke.yaml", ["relearn.inits=[mean]"]),
    "lf_mlf": ("lf_mlf_smoke.yaml", ["methods=[lf_mlf]", "sources=[en,de]", "seeds=[0]"]),
    "two_phase": (
        "two_phase_smoke.yaml",
        ["mitigation.replay=[]", "mitigation.freezing=[]", "evaluate.harness.limit=4"]
        + ["mixture=false", "pairs=[{phase1: english, phase2: dissimilar}]", "mitigation.pair=0"],
    ),
}


def _run(root: Path, name: str, config: str, overrides: list[str], *extra: str) -> Path:
    run, cache = root / name, root / f"cache-{name}"
    first = root / "cache-inline" / "data" / "bible"
    if name != "inline" and first.exists():  # the download is shared, not timed
        (cache / "data").mkdir(parents=True)
        (cache / "data" / "bible").symlink_to(first.resolve())
    env = {**os.environ, "OMP_NUM_THREADS": "1", "POLYMNESIA_CACHE": str(cache)}
    cmd = [sys.executable, "-m", "polymnesia", "run", str(CONFIGS / config), *overrides]
    res = subprocess.run(
        [*cmd, "--run-dir", str(run), *extra],
        env=env,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert "submit " in res.stdout if extra else True, res.stdout[-3000:]
    return run


@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_each_protocol_through_slurm_gives_the_inline_run(
    slurm_cluster: Any, tmp_path: Path, protocol: str
) -> None:
    config, overrides = PROTOCOLS[protocol]
    inline = _run(tmp_path, "inline", config, overrides)
    slurm = _run(tmp_path, "slurm", config, overrides, "cluster.poll_s=0.5", "--executor", "slurm")
    for f in ("results/scores.jsonl", "results/items.jsonl"):
        if (inline / f).exists():
            assert _rows(slurm / f) == _rows(inline / f), f
    want, got = _sections(inline / "report.md"), _sections(slurm / "report.md")
    assert list(got) == list(want)
    for heading in want:
        if heading not in TIMED:  # wall times and throughputs differ between any two runs
            assert got[heading] == want[heading], heading

"""The callbacks under DDP (the Trainer on 2 gloo processes, hf_ddp_cases.py): there they
edit the gradients in ``on_pre_optimizer_step``, after the clip. Without clipping that is
the loop's step, so the weights end where polymnesia's loop in one process ends on the same
global batches (float32 rounding of the 2-process mean: the FSDP2 tests' floor); with
clipping the callback says so in one line, and frozen rows stay bit-identical either way."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hf_helpers import TOL, largest_difference, random_data, run_loop, tiny_model, weights
from safetensors.torch import load_file

from polymnesia.methods.frozen_rows import FrozenRows
from polymnesia.methods.regularization import L2SP

SCRIPT = str(Path(__file__).parent / "hf_ddp_cases.py")


@pytest.fixture(scope="module")
def ddp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hf_ddp")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), env.get("PYTHONPATH", "")])
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    res = subprocess.run(
        [*launcher, SCRIPT, str(out)], env=env, capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr[-4000:]
    return out


@pytest.mark.integration
@pytest.mark.parametrize(
    ("case", "plugin"),
    [("frozen_rows", lambda: FrozenRows(30)), ("l2sp", lambda: L2SP(alpha=0.5, beta=0.1))],
)
def test_ddp_without_clipping_ends_where_the_loop_ends(
    ddp: Path, tmp_path: Path, case: str, plugin
) -> None:
    loop = weights(run_loop(tiny_model(), random_data(n=16), tmp_path, [plugin()], grad_clip=None))
    got = load_file(str(ddp / f"{case}.safetensors"))
    assert largest_difference(loop, got) <= TOL
    assert json.loads((ddp / f"{case}.warnings.json").read_text()) == []


@pytest.mark.integration
def test_ddp_with_clipping_warns_in_one_line_and_keeps_old_rows(ddp: Path) -> None:
    start = weights(tiny_model())
    got = load_file(str(ddp / "frozen_rows_clipped.safetensors"))
    emb = "model.embed_tokens.weight"
    assert torch.equal(got[emb][:30], start[emb][:30])
    (line,) = json.loads((ddp / "frozen_rows_clipped.warnings.json").read_text())
    assert "under DDP" in line and "after the Trainer clips" in line and "\n" not in line


@pytest.mark.integration
def test_fsdp2_through_the_trainer_on_cpu_runs_ddp_and_says_so(ddp: Path, tmp_path: Path) -> None:
    """FSDP2 through Accelerate (fsdp_version 2) on 2 CPU processes: Accelerate shards only
    on accelerators, so the Trainer trains under DDP (no parameter is a DTensor); the
    callback says so in one line and ends where DDP and the loop end."""
    assert json.loads((ddp / "frozen_rows_fsdp2.sharded.json").read_text()) is False
    (line,) = json.loads((ddp / "frozen_rows_fsdp2.warnings.json").read_text())
    assert "did not shard the model" in line and "\n" not in line
    loop = run_loop(tiny_model(), random_data(n=16), tmp_path, [FrozenRows(30)], grad_clip=None)
    got = load_file(str(ddp / "frozen_rows_fsdp2.safetensors"))
    assert largest_difference(weights(loop), got) <= TOL

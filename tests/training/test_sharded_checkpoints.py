"""A sharded (FSDP2) checkpoint is checked shard by shard against the layout in its manifest
before it is loaded: a process file that holds a tensor whole where it should hold its rows
(written while FSDP2 had the root gathered, after an evaluation) is skipped in one line and
the previous complete checkpoint is used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from polymnesia.io import atomic_write_json, sha256_file
from polymnesia.training import checkpoint
from polymnesia.training.fsdp import shard_rows
from polymnesia.training.state_io import save_tree

FULL = {"embed.weight": (5, 4), "norm.weight": (4,), "rope.inv_freq": (2,)}
LAYOUT = {
    "embed.weight": {"shape": [5, 4], "placement": "shard0"},
    "norm.weight": {"shape": [4], "placement": "shard0"},
    "rope.inv_freq": {"shape": [2], "placement": "replicate"},
}


def _write(folder: Path, step: int, *, gathered: str = "", layout: bool = True) -> Path:
    """A checkpoint of 2 processes as :func:`checkpoint.save` lays it out; ``gathered`` names a
    tensor that process 0 saved whole."""
    path = folder / f"step_{step:07d}"
    path.mkdir(parents=True)
    for rank in range(2):
        tree = {}
        for name, shape in FULL.items():
            rows = list(shape)
            if LAYOUT[name]["placement"] == "shard0" and not (rank == 0 and name == gathered):
                rows[0] = shard_rows(shape[0], 2, rank)
            tree[name] = torch.ones(rows)
        save_tree(path, f"model_rank{rank}", tree)
    files = {p.name: {"size": p.stat().st_size, "sha256": sha256_file(p)} for p in path.iterdir()}
    meta = {"format": checkpoint.FORMAT, "step": step, "loss": 1.0, "finite": True}
    meta.update(files=files, model_shards=2)
    if layout:
        meta["shard_layout"] = LAYOUT
    atomic_write_json(path / checkpoint.MANIFEST, meta)
    return path


@pytest.mark.parametrize(
    ("rows", "world", "want"),
    [(5, 2, [3, 2]), (4, 2, [2, 2]), (1, 2, [1, 0]), (7, 3, [3, 3, 1]), (2, 4, [1, 1, 0, 0])],
)
def test_shard_rows_splits_as_torch_chunk(rows: int, world: int, want: list[int]) -> None:
    got = [shard_rows(rows, world, r) for r in range(world)]
    assert got == want and sum(got) == rows
    chunks = [c.shape[0] for c in torch.arange(rows).chunk(world)]
    assert got[: len(chunks)] == chunks and not any(got[len(chunks) :])


def test_a_complete_sharded_checkpoint_verifies(tmp_path: Path) -> None:
    assert checkpoint.problem(_write(tmp_path, 2)) == ""


def test_a_shard_saved_whole_is_found_and_the_older_checkpoint_used(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, 2)
    bad = _write(tmp_path, 4, gathered="embed.weight")
    why = checkpoint.problem(bad)
    assert why == (
        "model_rank0 holds embed.weight as (5, 4), but its shard of (5, 4) on 2 processes is "
        "(3, 4) (saved while gathered?)"
    )
    found = checkpoint.latest_good(tmp_path, report=True, remove=True)
    assert found is not None and found[0] == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "step_0000004 skipped: model_rank0 holds embed.weight" in err[0]
    assert not bad.exists()


def test_a_sharded_checkpoint_without_a_layout_is_not_loaded(tmp_path: Path) -> None:
    path = _write(tmp_path, 2, layout=False)
    assert "records no shard_layout" in checkpoint.problem(path)


def test_a_layout_naming_other_tensors_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, 2)
    meta = json.loads((path / checkpoint.MANIFEST).read_text())
    meta["shard_layout"] = {**LAYOUT, "head.weight": {"shape": [5, 4], "placement": "shard0"}}
    atomic_write_json(path / checkpoint.MANIFEST, meta)
    assert "name different tensors (['head.weight'])" in checkpoint.problem(path)

"""A sharded (FSDP2) checkpoint resumes on another number of processes than wrote it: each
process cuts its rows of every weight, AdamW moment and sharded plugin state (LF-MLF's
accumulated update) out of the written shards, and the run ends where an uninterrupted run
ends. A per-process state that no layout describes is refused in one line naming its
plugin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from polymnesia.errors import PolymnesiaError
from polymnesia.training import checkpoint
from polymnesia.training.fsdp import copy_flat_rows, copy_rows, flat_size, local_shape
from polymnesia.training.reshard import Reshard, first_difference
from polymnesia.training.state_io import load_tree, save_tree

SCRIPT = str(Path(__file__).parent / "fsdp_cases.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]


def _shards(full: torch.Tensor, world: int) -> list[torch.Tensor]:
    """``full`` split over ``world`` processes on dimension 0 as FSDP2 splits it."""
    chunks = list(full.chunk(world))
    empty = full[:0]
    return chunks + [empty] * (world - len(chunks))


@pytest.mark.parametrize(
    ("rows", "written", "current"), [(5, 2, 1), (5, 1, 3), (7, 3, 2), (2, 4, 3)]
)
def test_copy_rows_cuts_any_split_into_any_other(rows: int, written: int, current: int) -> None:
    full = torch.randn(rows, 3, generator=torch.Generator().manual_seed(rows))
    old, new = _shards(full, written), _shards(full, current)
    for rank in range(current):
        out = torch.full(local_shape([rows, 3], current, rank), float("nan"))
        for r in range(written):
            copy_rows(out, old[r], [rows, 3], (r, written), (rank, current))
        assert torch.equal(out, new[rank])


def test_copy_flat_rows_cuts_each_tensor_of_a_flat_vector() -> None:
    g = torch.Generator().manual_seed(0)
    fulls = [
        torch.randn(5, 2, generator=g),
        torch.randn(3, generator=g),
        torch.randn(1, 4, generator=g),
    ]
    shapes = [list(t.shape) for t in fulls]

    def flat(world: int, rank: int) -> torch.Tensor:
        return torch.cat([_shards(t, world)[rank].reshape(-1) for t in fulls])

    for rank in range(3):
        out = torch.zeros(flat_size(shapes, 3, rank))
        for r in range(2):
            copy_flat_rows(out, flat(2, r), shapes, (r, 2), (rank, 3))
        assert torch.equal(out, flat(3, rank))


FULL = {"embed.weight": torch.arange(20.0).reshape(5, 4), "norm.weight": torch.arange(3.0) + 7}
LAYOUT = {
    "embed.weight": {"shape": [5, 4], "placement": "shard0"},
    "norm.weight": {"shape": [3], "placement": "shard0"},
    "rope.inv_freq": {"shape": [2], "placement": "replicate"},
}
PARAMS = ["embed.weight", "norm.weight"]
LOOP_LAYOUT = [{"path": ["plugins", "0", "combiner", "accumulated"], "params": PARAMS}]


def _flat(world: int, rank: int, scale: float = -1.0) -> torch.Tensor:
    return torch.cat([_shards(scale * FULL[n], world)[rank].reshape(-1) for n in PARAMS])


def _write(folder: Path, world: int, plugin_rng: list[int] | None = None) -> dict[str, Any]:
    """The per-process trees of a ``world``-process FSDP2 checkpoint (model, AdamW, the loop
    with a flat sharded plugin state) and its manifest's layout keys."""
    for r in range(world):
        model = {n: _shards(t, world)[r] for n, t in FULL.items()}
        model["rope.inv_freq"] = torch.tensor([1.0, 0.5])
        save_tree(folder, f"model_rank{r}", model)
        state = {
            i: {
                "step": torch.tensor(4.0),
                "exp_avg": _shards(0.1 * FULL[n], world)[r],
                "exp_avg_sq": _shards(0.01 * FULL[n], world)[r],
            }
            for i, n in enumerate(PARAMS)
        }
        groups = [{"lr": 0.01, "params": [0, 1]}]
        save_tree(folder, f"optimizer_rank{r}", {"state": state, "param_groups": groups})
        combiner = {
            "accumulated": _flat(world, r),
            "steps": 4,
            "rng": (plugin_rng or [0] * world)[r],
        }
        loop = {
            "counters": {"step": 4, "loss": float("nan")},
            "plugins": {"0": {"combiner": combiner}},
        }
        save_tree(folder, f"loop_rank{r}", loop)
    return {
        "model_shards": world,
        "shard_layout": LAYOUT,
        "optimizer_params": PARAMS,
        "loop_layout": LOOP_LAYOUT,
    }


@pytest.mark.parametrize(("written", "current"), [(2, 1), (2, 3), (1, 2)])
def test_every_sharded_tree_is_cut_for_the_new_process_count(
    tmp_path: Path, written: int, current: int
) -> None:
    meta = _write(tmp_path, written)
    for rank in range(current):
        cut = Reshard(tmp_path, meta, (rank, current), lambda s: load_tree(tmp_path, s))
        cut.check_params(PARAMS)
        model = cut.tree("model")
        for n, t in FULL.items():
            assert torch.equal(model[n], _shards(t, current)[rank]), n
        assert torch.equal(model["rope.inv_freq"], torch.tensor([1.0, 0.5]))
        opt = cut.tree("optimizer")
        assert opt["param_groups"] == [{"lr": 0.01, "params": [0, 1]}]
        for i, n in enumerate(PARAMS):
            assert torch.equal(opt["state"][i]["step"], torch.tensor(4.0))
            assert torch.equal(opt["state"][i]["exp_avg"], _shards(0.1 * FULL[n], current)[rank])
            assert torch.equal(
                opt["state"][i]["exp_avg_sq"], _shards(0.01 * FULL[n], current)[rank]
            )
        loop = cut.tree("loop")
        combiner = loop["plugins"]["0"]["combiner"]
        assert torch.equal(combiner["accumulated"], _flat(current, rank))
        assert combiner["steps"] == 4 and loop["counters"]["step"] == 4


def test_a_per_process_state_without_a_layout_is_refused_naming_its_plugin(tmp_path: Path) -> None:
    meta = _write(tmp_path, 2, plugin_rng=[11, 12])  # a generator drawn apart on each process
    cut = Reshard(
        tmp_path, meta, (0, 1), lambda s: load_tree(tmp_path, s), lambda p: f"plugin '{p[1]}'"
    )
    with pytest.raises(PolymnesiaError) as e:
        cut.tree("loop")
    assert str(e.value) == (
        f"checkpoint {tmp_path} was written by 2 processes, this run has 1: plugin '0' keeps "
        "per-process state (plugins.0.combiner.rng) that cannot be cut for another number of "
        "processes; resume on 2 processes"
    )


def test_what_cannot_be_cut_is_refused_in_one_line(tmp_path: Path) -> None:
    meta = _write(tmp_path, 2)

    def read(s: str) -> Any:
        return load_tree(tmp_path, s)

    with pytest.raises(PolymnesiaError, match="for other parameters than this run's"):
        Reshard(tmp_path, meta, (0, 1), read).check_params(PARAMS[::-1])
    with pytest.raises(PolymnesiaError, match="per-process state 'scaler' cannot be cut"):
        Reshard(tmp_path, meta, (0, 1), read).tree("scaler")
    older = {k: v for k, v in meta.items() if k != "optimizer_params"}
    with pytest.raises(PolymnesiaError, match="older polymnesia\\); resume on 2 processes$"):
        Reshard(tmp_path, older, (0, 1), read)
    with pytest.raises(PolymnesiaError, match="holds the whole model"):
        Reshard(tmp_path, {}, (0, 1), read)
    torn = {
        **meta,
        "shard_layout": {**LAYOUT, "embed.weight": {"shape": [6, 4], "placement": "shard0"}},
    }
    with pytest.raises(
        PolymnesiaError, match="process 1's embed.weight is \\(2, 4\\), its shard is \\(3, 4\\)"
    ):
        Reshard(tmp_path, torn, (0, 1), read).tree("model")


# --- end to end: real FSDP2 runs on gloo processes ----------------------------------------

CASES = ["plain", "lf_mlf_update"]  # LF-MLF keeps a flat sharded plugin state


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **extra}
    env.pop("POLYMNESIA_ENGINE", None)
    return env


def _run(cmd: list[str], **extra: str) -> str:
    res = subprocess.run(cmd, env=_env(**extra), capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-4000:]
    return res.stderr


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Each case on one FSDP2 process, never interrupted, with the tolerance of
    tests/training/test_fsdp.py (:func:`test_fsdp.tolerance`, from the case's rounding twin)."""
    from test_fsdp import TWIN_NOISE, tolerance

    root = tmp_path_factory.mktemp("reshard_ref")
    _run([sys.executable, SCRIPT, str(root / "one"), "fsdp2", *CASES])
    _run(
        [sys.executable, SCRIPT, str(root / "twin"), "auto", *CASES],
        FSDP_CASES_NOISE=repr(TWIN_NOISE),
    )
    tol = {c: tolerance(_load(root / "one" / c), _load(root / "twin" / c)) for c in CASES}
    return {"folder": root / "one", "tol": tol}


def _load(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "weights.safetensors"))


def _losses(folder: Path) -> list[float]:
    return [json.loads(x)["loss"] for x in (folder / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.integration
@pytest.mark.parametrize(
    ("first", "then", "stop"),
    [(TORCHRUN, [sys.executable], 5), ([sys.executable], TORCHRUN, 3)],
    ids=["2_to_1", "1_to_2"],
)
def test_fsdp2_checkpoint_resumes_on_another_number_of_processes(
    uninterrupted: dict[str, Any], tmp_path: Path, first: list[str], then: list[str], stop: int
) -> None:
    """Stopped after step ``stop`` (its last checkpoint the step before, every 2 steps) on one
    number of processes, resumed on the other: the weights and losses of the run that was
    never stopped, to float32 rounding (FSDP2 on 2 processes reduces in another order)."""
    _run([*first, SCRIPT, str(tmp_path), "fsdp2", *CASES], FSDP_CASES_STOP_AT=str(stop))
    wrote = 2 if first is TORCHRUN else 1
    for case in CASES:
        (ckpt,) = (tmp_path / case / "checkpoints").iterdir()
        meta = json.loads((ckpt / checkpoint.MANIFEST).read_text())
        assert ckpt.name == f"step_{stop - 1:07d}" and meta["model_shards"] == wrote
        if wrote == 2:  # seeded alike and drawing alike: a new process may take process 0's
            rng = [load_tree(ckpt, f"rng_{r}") for r in range(2)]
            assert first_difference(rng[0], rng[1], [], []) is None
    err = _run([*then, SCRIPT, str(tmp_path), "fsdp2", *CASES])
    assert err.count(f"written by {wrote} process") == len(CASES), err[-2000:]
    assert "resharded for" in err and "RNG not restored" not in err
    lf = json.loads(
        next((tmp_path / "lf_mlf_update" / "checkpoints").iterdir())
        .joinpath(checkpoint.MANIFEST)
        .read_text()
    )
    assert lf["loop_layout"][0]["path"] == ["plugins", "0", "combiner", "accumulated"]
    for case in CASES:
        assert (tmp_path / case / "engine.txt").read_text().split() == ["fsdp2", "6"]
        want, got = _load(uninterrupted["folder"] / case), _load(tmp_path / case)
        tol = uninterrupted["tol"][case]
        for k in want:
            assert torch.allclose(want[k], got[k], rtol=0, atol=tol), (
                case,
                k,
                (want[k] - got[k]).abs().max(),
            )
        assert _losses(tmp_path / case) == pytest.approx(
            _losses(uninterrupted["folder"] / case), rel=1e-6
        )


def test_a_sharded_checkpoint_under_an_engine_of_whole_models_is_refused(tmp_path: Path) -> None:
    meta = _write(tmp_path, 2)
    (tmp_path / checkpoint.MANIFEST).write_text(json.dumps({**meta, "files": {}}))

    class Acc:
        process_index, num_processes, is_main_process = 0, 1, True

    with pytest.raises(PolymnesiaError, match="resume it with train.engine: fsdp2$"):
        checkpoint.load(Acc(), tmp_path, torch.nn.Linear(2, 2), {})

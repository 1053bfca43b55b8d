"""Pickle-free, verified, finite-only training checkpoints; divergence flags."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import pytest
import torch
from robustness_helpers import flip_byte

from polymnesia.errors import TrainingDiverged
from polymnesia.metrics.lm import perplexity, word_perplexity
from polymnesia.testing import tiny_model
from polymnesia.training import checkpoint, health
from polymnesia.training.config import TrainConfig
from polymnesia.training.data import PackedLMData
from polymnesia.training.loop import train
from polymnesia.training.plugins import TrainingPlugin
from polymnesia.training.state_io import load_tree, save_tree


def nano() -> torch.nn.Module:
    return tiny_model(
        "mistral", 40, hidden_size=32, intermediate_size=64, max_position_embeddings=64, seed=0
    )


def data() -> PackedLMData:
    g = torch.Generator().manual_seed(0)
    base = torch.arange(16) % 10 + 3
    return PackedLMData(
        torch.stack([torch.roll(base, int(s)) for s in torch.randint(0, 10, (32,), generator=g)])
    )


def cfg(**kw) -> TrainConfig:  # type: ignore[no-untyped-def]
    base = dict(steps=8, batch_size=8, block_size=16, lr=5e-3, log_every=1, progress_bar=False)
    return TrainConfig(**{**base, "checkpoint_every": 4, **kw})


class Stop(TrainingPlugin):
    def __init__(self, at: int) -> None:
        self.at = at

    def after_optimizer_step(self, state) -> None:  # type: ignore[no-untyped-def]
        if state.step == self.at:
            raise KeyboardInterrupt


class Planted:
    """Unpickling this touches a file: the proof that a pickle was loaded."""

    def __init__(self, proof: Path) -> None:
        self.proof = proof

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (Path.touch, (self.proof,))


def _interrupted(out: Path, at: int = 6) -> Path:
    with pytest.raises(KeyboardInterrupt):
        train(nano(), data(), cfg(), out, seed=0, plugins=[Stop(at)])
    [(_, ckpt)] = checkpoint.checkpoints(out / "checkpoints")
    return ckpt


def _same(a: torch.nn.Module, b: torch.nn.Module) -> None:
    for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True):
        assert torch.equal(x, y)


def test_checkpoint_holds_no_pickle_and_resume_is_bit_identical(tmp_path: Path, monkeypatch):  # type: ignore[no-untyped-def]
    full, _ = train(nano(), data(), cfg(), tmp_path / "full", seed=0)
    ckpt = _interrupted(tmp_path / "cut")
    names = sorted(p.name for p in ckpt.iterdir())
    assert all(n.endswith((".json", ".safetensors")) for n in names), names
    assert {"model.safetensors", "optimizer.safetensors", "checkpoint.json"} <= set(names)
    proof = tmp_path / "pickle-was-loaded"
    for planted in ("custom_checkpoint_0.pkl", "random_states_0.pkl", "optimizer.bin"):
        (ckpt / planted).write_bytes(pickle.dumps(Planted(proof)))

    def refuse(*a, **k):  # type: ignore[no-untyped-def]
        raise AssertionError("resume must not unpickle")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(torch, "load", refuse)
    resumed, res = train(nano(), data(), cfg(), tmp_path / "cut", seed=0)
    assert res.resumed_from == 4 and not proof.exists()
    _same(full, resumed)


def test_state_trees_round_trip_exactly(tmp_path: Path):
    import random

    import numpy as np

    tree = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
        "state": {0: {"step": torch.tensor(3.0), "exp_avg": torch.randn(2, 3)}},
        "groups": [{"betas": (0.9, 0.95), "params": [0, 1], "lr": 1e-3}],
        "loss": float("nan"),
    }
    save_tree(tmp_path, "t", tree)
    back = load_tree(tmp_path, "t")
    assert back["python"] == tree["python"]
    assert back["numpy"][0] == "MT19937" and (back["numpy"][1] == tree["numpy"][1]).all()
    assert back["numpy"][1].dtype == tree["numpy"][1].dtype
    assert torch.equal(back["torch"], tree["torch"])
    assert torch.equal(back["state"][0]["exp_avg"], tree["state"][0]["exp_avg"])
    assert back["groups"][0]["betas"] == (0.9, 0.95) and math.isnan(back["loss"])
    with pytest.raises(TypeError, match="cannot save a object"):
        save_tree(tmp_path, "bad", {"x": object()})


#: what is wrong with the newest checkpoint -> it is skipped (one line), training restarts from 0
BAD_CHECKPOINTS = [
    ("flipped optimizer byte", lambda c: flip_byte(c / "optimizer.safetensors", keep_mtime=True)),
    ("truncated model", lambda c: (c / "model.safetensors").write_bytes(b"\0" * 16)),
    ("manifest missing", lambda c: (c / "checkpoint.json").unlink()),
    ("older pickle format", lambda c: [p.unlink() for p in c.iterdir()] and None),
]


@pytest.mark.parametrize(("what", "damage"), BAD_CHECKPOINTS, ids=[b[0] for b in BAD_CHECKPOINTS])
def test_bad_checkpoint_is_skipped_never_loaded(tmp_path: Path, capsys, what, damage):  # type: ignore[no-untyped-def]
    ckpt = _interrupted(tmp_path / "cut")
    damage(ckpt)
    if what == "older pickle format":
        (ckpt / "custom_checkpoint_0.pkl").write_bytes(pickle.dumps(Planted(tmp_path / "proof")))
    capsys.readouterr()
    _, res = train(nano(), data(), cfg(), tmp_path / "cut", seed=0)
    err = capsys.readouterr().err
    assert res.resumed_from is None and f"checkpoint {ckpt} skipped" in err
    assert not (tmp_path / "proof").exists()
    _, fresh = train(nano(), data(), cfg(), tmp_path / "fresh", seed=0)
    assert res.final_loss == fresh.final_loss  # started over, exactly as a fresh run


class PoisonAfterUpdate(TrainingPlugin):
    """Breaks the weights in the update of step ``at``: the loss of that step was still finite."""

    def __init__(self, at: int) -> None:
        self.at = at

    def after_optimizer_step(self, state) -> None:  # type: ignore[no-untyped-def]
        if state.step == self.at:
            with torch.no_grad():
                next(state.unwrapped.parameters()).view(-1)[:5] = float("nan")


@pytest.mark.parametrize("at", [1, 3, 5])
def test_non_finite_update_is_never_checkpointed(tmp_path: Path, at: int):
    prior = f"step_{at - 1:07d}" if at > 1 else "none yet"
    with pytest.raises(
        TrainingDiverged, match=rf"non-finite after the update of step {at}.*{prior}"
    ):
        train(
            nano(),
            data(),
            cfg(checkpoint_every=1),
            tmp_path,
            seed=0,
            plugins=[PoisonAfterUpdate(at)],
        )
    good = checkpoint.latest_good(tmp_path / "checkpoints")
    assert (good[0] if good else 0) == at - 1
    for _, path in checkpoint.checkpoints(tmp_path / "checkpoints"):
        from safetensors.torch import load_file

        assert all(torch.isfinite(t).all() for t in load_file(path / "model.safetensors").values())


def test_huge_learning_rate_is_stopped_or_flagged(tmp_path: Path):
    try:
        _, res = train(nano(), data(), cfg(lr=1e2, steps=30, warmup_ratio=0.0), tmp_path, seed=0)
    except TrainingDiverged as e:
        assert "lower train.lr" in str(e)
        return
    assert res.flags, "a run with lr=1e2 must not pass as healthy"
    import json

    report = json.loads((tmp_path / "train_health.json").read_text())
    assert report["diverged"] and report["warnings"]


def test_perplexity_of_a_blown_up_model_is_inf_not_overflow():
    from polymnesia.evaluation.likelihood import LMStats

    assert perplexity(1e6, 10) == math.inf and word_perplexity(1e6, 1) == math.inf
    assert LMStats(nll=1e6, tokens=10, bytes=10, words=1).perplexity == math.inf
    assert perplexity(math.log(5) * 4, 4) == pytest.approx(5.0)


LN40 = math.log(40)
#: (first loss, recent losses, steps) -> flags; chance = ln 40
CURVES = [
    ((3.7, [3.5, 3.0, 2.3], 12), []),  # learning
    ((3.7, [3.8, 3.75, 3.72], 12), []),  # a short run that has not learnt yet: fine
    ((3.7, [5.0, 6.0, 7.0], 12), ["diverged"]),
    ((3.7, [LN40] * 10, 30), ["stuck_at_chance"]),  # explodes, then sits at ln V
    ((2.0, [LN40 + 0.01] * 10, 30), ["diverged", "stuck_at_chance"]),
    ((3.7, [LN40] * 5, 8), []),  # too short to call
    ((3.7, [LN40 * 0.8] * 10, 30), []),  # flat but below chance: a plateau, not dead
]


@pytest.mark.parametrize(("curve", "flags"), CURVES)
def test_health_flags(curve, flags):  # type: ignore[no-untyped-def]
    first, recent, steps = curve
    assert health.assess(first, recent, steps, LN40)["flags"] == flags


def test_chance_loss_is_log_of_output_classes():
    assert health.chance_loss(nano()) == pytest.approx(LN40)

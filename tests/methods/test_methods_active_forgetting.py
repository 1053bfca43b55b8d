"""Active forgetting: resets exactly every K steps, Adam state reset, no reset after the end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from methods_helpers import VOCAB, run, tiny_model

from polymnesia.errors import ConfigError
from polymnesia.methods.active_forgetting import ActiveForgetting, check_reset_every, is_reset_step
from polymnesia.training.plugins import PLUGINS, LoopState, TrainingPlugin, build_plugins
from polymnesia.training.schedule import windowed


class Recorder(TrainingPlugin):
    """Snapshots after every step (runs after the plugin under test)."""

    def __init__(self) -> None:
        self.weights: list[torch.Tensor] = []
        self.emb_state: list[dict[str, Any]] = []
        self.body_step: list[float] = []
        self.lrs: list[list[float]] = []

    def setup(self, state: LoopState) -> None:
        self.weights.append(state.unwrapped.get_input_embeddings().weight.detach().clone())

    def after_optimizer_step(self, state: LoopState) -> None:
        model = state.unwrapped
        w = model.get_input_embeddings().weight
        self.weights.append(w.detach().clone())
        inner = state.optimizer.optimizer
        st = inner.state[w]
        self.emb_state.append({k: v.clone() for k, v in st.items()})
        body = model.model.layers[0].mlp.up_proj.weight
        self.body_step.append(float(inner.state[body]["step"]))
        self.lrs.append([g["lr"] for g in inner.param_groups])


def expected_draw(step: int, seed: int = 0, std: float = 0.02) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed * 1_000_003 + step)
    w = torch.randn((VOCAB, 16), generator=g) * std
    w[0] = 0.0
    return w


def test_reset_schedule_pure() -> None:
    assert [s for s in range(1, 11) if is_reset_step(s, 3, 10)] == [3, 6, 9]
    assert [s for s in range(1, 10) if is_reset_step(s, 3, 9)] == [3, 6]  # never after the last


@pytest.mark.parametrize("bad", [0, -2, 1.5, "3", True])
def test_reset_every_must_be_positive_int(bad: Any) -> None:
    with pytest.raises(ConfigError, match="positive integer"):
        build_plugins([{"name": "active_forgetting", "reset_every": bad}])


def test_reset_every_below_steps() -> None:
    with pytest.raises(ConfigError, match="smaller than train.steps"):
        check_reset_every(10, 10)


def test_registered() -> None:
    assert "active_forgetting" in PLUGINS.names() and "frozen_rows" in PLUGINS.names()


def test_discontinuity_moments_and_no_final_reset(tmp_path: Path) -> None:
    rec = Recorder()
    af = ActiveForgetting(reset_every=3, replay_schedule=False)
    run(tiny_model(), 9, tmp_path, [af, rec], lr=1e-4)
    assert af.resets == [3, 6]  # step 9 is the last: no reset
    for step in range(1, 10):
        before, after = rec.weights[step - 1], rec.weights[step]
        rel = float((after - before).norm() / before.norm())
        st = rec.emb_state[step - 1]
        if step in (3, 6):
            assert rel > 0.5, (step, rel)
            assert torch.equal(after, expected_draw(step))  # N(0, 0.02), pad row 0
            assert float(st["exp_avg"].abs().sum()) == 0.0
            assert float(st["exp_avg_sq"].abs().sum()) == 0.0
            assert float(st["step"]) == 0.0  # own bias-correction counter restarts
        else:
            assert rel < 0.05, (step, rel)
            assert float(st["exp_avg"].abs().sum()) > 0.0
            last_reset = max([r for r in (3, 6) if r < step], default=0)
            assert float(st["step"]) == step - last_reset
    assert rec.body_step == list(range(1, 10))  # the body's counter is never reset
    assert not torch.equal(rec.weights[-1], expected_draw(9))


def test_embedding_lr_replays_inside_windows(tmp_path: Path) -> None:
    rec = Recorder()
    af = ActiveForgetting(reset_every=4, replay_schedule=True, warmup_ratio=0.5)
    run(tiny_model(), 10, tmp_path, [af, rec], lr=1e-3, warmup_ratio=0.2)
    emb_lr = [lrs[-1] for lrs in rec.lrs]  # the embeddings' group comes last
    # after step s the scheduler has stepped s times: lr = peak * windowed(s)
    want = [1e-3 * windowed(s, window=4, warmup=2, total=4) for s in range(1, 11)]
    assert emb_lr == pytest.approx(want)
    assert len(rec.lrs[0]) == 3  # decay, no_decay, embeddings


@pytest.mark.parametrize("reset_head", [False, True])
def test_untied_head(tmp_path: Path, reset_head: bool) -> None:
    model = tiny_model(tied=False)
    af = ActiveForgetting(reset_every=2, reset_head=reset_head, replay_schedule=False)

    class Head(TrainingPlugin):
        def __init__(self) -> None:
            self.rel: list[float] = []
            self.prev: torch.Tensor | None = None

        def setup(self, state: LoopState) -> None:
            self.prev = state.unwrapped.lm_head.weight.detach().clone()

        def after_optimizer_step(self, state: LoopState) -> None:
            w = state.unwrapped.lm_head.weight.detach().clone()
            assert self.prev is not None
            self.rel.append(float((w - self.prev).norm() / self.prev.norm()))
            self.prev = w

    head = Head()
    run(model, 3, tmp_path, [af, head], lr=1e-4)
    assert (head.rel[1] > 0.5) == reset_head


def test_tied_head_is_reset_with_embeddings(tmp_path: Path) -> None:
    model = tiny_model(tied=True)
    run(model, 3, tmp_path, [ActiveForgetting(reset_every=2, replay_schedule=False)], lr=1e-4)
    assert model.lm_head.weight is model.get_input_embeddings().weight


@pytest.mark.integration
def test_two_processes_end_identical_to_one(tmp_path: Path) -> None:
    """Resets drawn on rank 0 and broadcast: 2 gloo processes end where 1 process ends."""
    import os
    import subprocess
    import sys

    script = str(Path(__file__).parent / "af_two_procs.py")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launchers = {
        "one": [sys.executable],
        "two": [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"],
    }
    weights = {}
    for name, launcher in launchers.items():
        out = tmp_path / name
        out.mkdir()
        res = subprocess.run(
            [*launcher, script, str(out)], env=env, capture_output=True, text=True, timeout=300
        )
        assert res.returncode == 0, res.stderr[-3000:]
        weights[name] = torch.load(out / "weights.pt")
    for k, v in weights["one"].items():
        assert torch.allclose(v, weights["two"][k], atol=1e-5), k

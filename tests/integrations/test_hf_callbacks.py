"""polymnesia's methods as Trainer callbacks: the real ``transformers.Trainer`` with the
callback and polymnesia's loop with the matching plugin, on the same batches, seed, AdamW
and schedule (hf_helpers), end on the same weights within the FSDP2 equality tests' floor;
frozen weights stay bit-identical to the starting model."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from hf_helpers import (
    STEPS,
    TOL,
    StopAt,
    largest_difference,
    loop_batches,
    run_loop,
    run_trainer,
    tiny_model,
    trainer_args,
    weights,
)
from transformers import Trainer

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.integrations import (
    ActiveForgettingCallback,
    FrozenRowsCallback,
    LayerFreezingCallback,
)
from polymnesia.integrations.base import check_args
from polymnesia.methods.active_forgetting import ActiveForgetting
from polymnesia.methods.frozen_rows import FrozenRows
from polymnesia.methods.layer_freezing import LayerFreezing
from polymnesia.training.data import PackedLMData

N_OLD = 30  # of the tiny model's 50 rows: rows 30..49 are the "new tokens"
LAYERS = 4  # for layer freezing: a choice among decoder layers


def test_plain_trainer_equals_the_loop(tmp_path: Path, data: PackedLMData) -> None:
    """The comparison's footing: with no method, the Trainer and the loop agree bit for bit
    (so any difference below is the callback's)."""
    loop = weights(run_loop(tiny_model(), data, tmp_path / "loop", []))
    tr = run_trainer(tiny_model(), data, tmp_path / "hf", [])
    assert largest_difference(loop, weights(tr.model)) == 0.0


@pytest.mark.parametrize("tied", [False, True])
def test_frozen_rows_trainer_equals_the_loop(
    tmp_path: Path, data: PackedLMData, tied: bool
) -> None:
    start = weights(tiny_model(tied))
    loop = weights(run_loop(tiny_model(tied), data, tmp_path / "loop", [FrozenRows(N_OLD)]))
    cb = FrozenRowsCallback(N_OLD)
    tr = run_trainer(tiny_model(tied), data, tmp_path / "hf", [cb])
    got = weights(tr.model)
    assert largest_difference(loop, got) <= TOL
    emb = "model.embed_tokens.weight"
    assert torch.equal(got[emb][:N_OLD], start[emb][:N_OLD])  # old rows: bit-identical
    assert not torch.equal(got[emb][N_OLD:], start[emb][N_OLD:])  # new rows trained
    body = [k for k in start if k not in (emb, "lm_head.weight")]
    assert body and all(torch.equal(got[k], start[k]) for k in body)  # the body is frozen


def test_frozen_rows_mask_before_the_clip(tmp_path: Path, data: PackedLMData) -> None:
    """With a clip that binds (max_grad_norm far below the gradient norm) the new rows' step
    depends on whether the old rows' gradient is in the norm: the callback masks it before
    the Trainer clips, as the loop does."""
    loop = weights(
        run_loop(tiny_model(), data, tmp_path / "loop", [FrozenRows(N_OLD)], grad_clip=1e-3)
    )
    tr = run_trainer(
        tiny_model(), data, tmp_path / "hf", [FrozenRowsCallback(N_OLD)], max_grad_norm=1e-3
    )
    assert largest_difference(loop, weights(tr.model)) <= TOL


def test_active_forgetting_trainer_equals_the_loop(tmp_path: Path, data: PackedLMData) -> None:
    """Resets after steps 2 and 4 of 6, with the embeddings' replayed window schedule."""
    opts = {"reset_every": 2, "seed": 3}
    loop = weights(run_loop(tiny_model(), data, tmp_path / "loop", [ActiveForgetting(**opts)]))
    cb = ActiveForgettingCallback(**opts)
    tr = run_trainer(tiny_model(), data, tmp_path / "hf", [cb])
    assert cb.resets == [2, 4]
    assert largest_difference(loop, weights(tr.model)) <= TOL
    assert len(tr.optimizer.param_groups) == 3  # decay, no decay, the embeddings' window


def test_active_forgetting_without_replay_keeps_the_trainers_groups(
    tmp_path: Path, data: PackedLMData
) -> None:
    opts = {"reset_every": 3, "replay_schedule": False, "reset_head": True}
    loop = weights(run_loop(tiny_model(), data, tmp_path / "loop", [ActiveForgetting(**opts)]))
    cb = ActiveForgettingCallback(**opts)
    tr = run_trainer(tiny_model(), data, tmp_path / "hf", [cb])
    assert cb.resets == [3]
    assert largest_difference(loop, weights(tr.model)) <= TOL
    assert len(tr.optimizer.param_groups) == 2


@pytest.mark.parametrize(
    "opts",
    [
        {"strategy": "random", "pct": 50, "seed": 1},
        {"strategy": "spectrum", "pct": 50, "freeze": "unselected"},
        {"params": ["model.layers.1.self_attn.q_proj.weight"]},
    ],
    ids=["random", "spectrum", "names"],
)
def test_layer_freezing_trainer_equals_the_loop(
    tmp_path: Path, data: PackedLMData, opts: dict
) -> None:
    start = weights(tiny_model(num_hidden_layers=LAYERS))
    plugin = LayerFreezing(**opts)
    loop = weights(run_loop(tiny_model(num_hidden_layers=LAYERS), data, tmp_path / "l", [plugin]))
    cb = LayerFreezingCallback(**opts)
    tr = run_trainer(tiny_model(num_hidden_layers=LAYERS), data, tmp_path / "hf", [cb])
    got = weights(tr.model)
    assert cb.frozen == plugin.frozen and cb.frozen
    assert all(torch.equal(got[k], start[k]) for k in cb.frozen)
    assert largest_difference(loop, got) <= TOL


def test_layer_freezing_most_changed_reads_the_folder_before(
    tmp_path: Path, data: PackedLMData
) -> None:
    before = tiny_model(seed=5)
    before.save_pretrained(tmp_path / "before")
    opts = {"strategy": "most_changed", "before": str(tmp_path / "before"), "top_k": 1}
    plugin = LayerFreezing(**opts)
    loop = weights(run_loop(tiny_model(), data, tmp_path / "loop", [plugin]))
    cb = LayerFreezingCallback(**opts)
    tr = run_trainer(tiny_model(), data, tmp_path / "hf", [cb], steps=STEPS)
    assert cb.frozen == plugin.frozen and cb.frozen
    assert largest_difference(loop, weights(tr.model)) <= TOL


def test_a_callback_added_after_the_trainer_was_made_still_freezes(
    tmp_path: Path, data: PackedLMData
) -> None:
    """``trainer.add_callback``: no on_init_end; the parameters are frozen at train begin,
    before any gradient, so they stay bit-identical although the optimizer holds them."""
    start = weights(tiny_model(num_hidden_layers=LAYERS))
    trainer = Trainer(
        model=tiny_model(num_hidden_layers=LAYERS),
        args=trainer_args(tmp_path),
        train_dataset=loop_batches(data),
    )
    cb = LayerFreezingCallback(strategy="random", pct=50, seed=1)
    trainer.add_callback(cb)
    trainer.train()
    got = weights(trainer.model)
    assert cb.frozen and all(torch.equal(got[k], start[k]) for k in cb.frozen)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: FrozenRowsCallback(50), "leaves no new token rows"),
        (lambda: FrozenRowsCallback(0), "leaves no new token rows"),
        (lambda: ActiveForgettingCallback(reset_every=6), "must be smaller than train.steps"),
    ],
    ids=["no-new-rows", "no-old-rows", "k-too-large"],
)
def test_bad_setups_are_refused_in_one_line(
    tmp_path: Path, data: PackedLMData, make, message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        run_trainer(tiny_model(), data, tmp_path, [make()])
    assert "\n" not in str(e.value)


def test_bad_options_are_refused_in_one_line() -> None:
    for make in (
        lambda: FrozenRowsCallback("3"),  # type: ignore[arg-type]
        lambda: ActiveForgettingCallback(reset_every=0),
        lambda: ActiveForgettingCallback(reset_every=2, colour="red"),
        lambda: LayerFreezingCallback(strategy="loudest"),
        lambda: LayerFreezingCallback(params=["x"], strategy="random"),
    ):
        with pytest.raises(ConfigError) as e:
            make()
        assert "\n" not in str(e.value)


def test_a_model_without_input_embeddings_is_refused_in_one_line(tmp_path: Path) -> None:
    class NoEmbeddings(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

    cb = ActiveForgettingCallback(reset_every=2)
    with pytest.raises(PolymnesiaError, match="no input embedding matrix") as e:
        cb.prepare(NoEmbeddings())
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("replay", [True, False], ids=["replay", "no-replay"])
def test_active_forgetting_resumes_exactly(make_trainer, resume, replay: bool) -> None:
    """A run stopped after its step-3 checkpoint and resumed: with replay_schedule the
    Trainer's optimizer loads the checkpoint (saved in its own layout) and the callback makes
    the embeddings' window group again; the reset after step 4 is drawn from the same seed,
    the resets before the checkpoint come back from the Trainer's state, and the weights are
    the uninterrupted run's, bit for bit."""
    opts = {"reset_every": 2, "replay_schedule": replay}
    cbs: list[ActiveForgettingCallback] = []

    def callbacks() -> list[ActiveForgettingCallback]:
        cbs.append(ActiveForgettingCallback(**opts))
        return cbs[-1:]

    whole, resumed = resume(make_trainer, callbacks)
    assert cbs[0].resets == cbs[2].resets == [2, 4]
    assert largest_difference(weights(whole.model), weights(resumed.model)) == 0.0
    assert len(resumed.optimizer.param_groups) == (3 if replay else 2)
    assert [g["lr"] for g in whole.optimizer.param_groups] == [
        g["lr"] for g in resumed.optimizer.param_groups
    ]


def test_active_forgetting_rebuilt_by_the_trainer_on_resume(make_trainer, resume) -> None:
    """With ``restore_callback_states_from_checkpoint`` the Trainer builds the callback anew
    from its saved state (``ExportableState``): the new one has the resets before the
    checkpoint and the run ends on the uninterrupted run's weights."""

    def make(out, callbacks, **kw):  # type: ignore[no-untyped-def]
        return make_trainer(out, callbacks, restore_callback_states_from_checkpoint=True, **kw)

    whole, resumed = resume(make, lambda: [ActiveForgettingCallback(reset_every=2)])
    (cb,) = [
        c for c in resumed.callback_handler.callbacks if isinstance(c, ActiveForgettingCallback)
    ]
    assert cb.resets == [2, 4]
    assert largest_difference(weights(whole.model), weights(resumed.model)) == 0.0


def test_replay_checkpoints_the_optimizer_in_the_trainers_layout(make_trainer, tmp_path) -> None:
    """The saved optimizer has the Trainer's two groups (the embeddings back in the first),
    and every parameter's moments."""
    save = {"save_strategy": "steps", "save_steps": 2}
    cut = make_trainer(
        tmp_path / "cut", [ActiveForgettingCallback(reset_every=3), StopAt(2)], **save
    )
    cut.train()
    assert len(cut.optimizer.param_groups) == 3
    saved = torch.load(tmp_path / "cut" / "checkpoint-2" / "optimizer.pt", weights_only=True)
    assert len(saved["param_groups"]) == 2
    live = [p for g in cut.optimizer.param_groups for p in g["params"]]
    assert sum(len(g["params"]) for g in saved["param_groups"]) == len(live) == len(saved["state"])


def test_replay_needs_the_trainers_lambda_schedule(tmp_path: Path, data: PackedLMData) -> None:
    model = tiny_model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    trainer = Trainer(
        model=model,
        args=trainer_args(tmp_path),
        train_dataset=loop_batches(data),
        optimizers=(opt, torch.optim.lr_scheduler.StepLR(opt, step_size=2)),
        callbacks=[ActiveForgettingCallback(reset_every=2)],
    )
    with pytest.raises(ConfigError, match="replay_schedule needs the Trainer's LambdaLR") as e:
        trainer.train()
    assert "\n" not in str(e.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"deepspeed": "ds_config.json"}, "DeepSpeed owns the gradients"),
        ({"fsdp": True, "fsdp_config": {"version": 1}}, "FSDP version 1 flattens"),
    ],
    ids=["deepspeed", "fsdp1"],
)
def test_deepspeed_and_fsdp1_are_refused_in_one_line(args: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        check_args("FrozenRowsCallback", SimpleNamespace(**args))
    assert "\n" not in str(e.value)

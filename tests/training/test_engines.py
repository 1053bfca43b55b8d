"""Engine objects (chosen once per run) and the typed stop request of the loop state."""

from __future__ import annotations

import ast
import contextlib
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from test_training_loop import cfg, data, losses, nano_model

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.training import engines, loop
from polymnesia.training.config import TrainConfig
from polymnesia.training.engines import DDP, FSDP2, Engine, Single, select
from polymnesia.training.loop import standard_step, train
from polymnesia.training.plugins import LoopState, TrainingPlugin


def launched(kind: str) -> SimpleNamespace:
    """An Accelerator stand-in launched in Accelerate's ``kind`` mode."""
    return SimpleNamespace(distributed_type=SimpleNamespace(value=kind))


@pytest.mark.parametrize(
    ("kind", "want", "name"),
    [
        ("NO", Single, "single"),
        ("MULTI_GPU", DDP, "ddp"),
        ("MULTI_CPU", DDP, "ddp"),
        ("FSDP", Engine, "fsdp"),
        ("DEEPSPEED", Engine, "deepspeed"),
    ],
)
def test_the_launch_chooses_the_engine(monkeypatch, kind: str, want: type, name: str) -> None:
    monkeypatch.delenv("POLYMNESIA_ENGINE", raising=False)
    engine = select(launched(kind), TrainConfig())
    assert type(engine) is want and engine.name == name


@pytest.mark.parametrize("kind", ["NO", "MULTI_GPU"])
def test_fsdp2_is_chosen_by_the_config_or_the_environment(monkeypatch, kind: str) -> None:
    monkeypatch.delenv("POLYMNESIA_ENGINE", raising=False)
    assert type(select(launched(kind), TrainConfig(engine="fsdp2"))) is FSDP2
    monkeypatch.setenv("POLYMNESIA_ENGINE", "fsdp2")
    assert type(select(launched(kind), TrainConfig())) is FSDP2


def test_fsdp2_under_accelerates_own_sharding_is_refused(monkeypatch) -> None:
    monkeypatch.delenv("POLYMNESIA_ENGINE", raising=False)
    with pytest.raises(ConfigError, match="launched in Accelerate's fsdp mode"):
        select(launched("FSDP"), TrainConfig(engine="fsdp2"))


def test_whole_engines_place_the_model_and_sharded_ones_leave_it() -> None:
    model = torch.nn.Linear(2, 2)
    moved: list[object] = []
    model.to = lambda device: moved.append(device)  # type: ignore[method-assign,assignment,return-value]
    Single().place(model, "cpu")
    DDP().place(model, "cpu")
    FSDP2().place(model, "cpu")
    Engine("deepspeed").place(model, "cpu")
    assert moved == ["cpu", "cpu"]


def test_single_reports_the_norm_unclipped_and_accelerates_sharding_does_not() -> None:
    model = torch.nn.Linear(3, 1, bias=False)
    model.weight.grad = torch.tensor([[3.0, 0.0, 4.0]])
    acc = SimpleNamespace(clip_grad_norm_=lambda params, max_norm: ("clipped", max_norm))
    assert float(Single().clip(acc, model, None)) == pytest.approx(5.0)
    assert DDP().clip(acc, model, 1.0) == ("clipped", 1.0)
    assert Engine("fsdp").clip(acc, model, None) is None  # only Accelerate's engine knows it
    assert Engine("fsdp").clip(acc, model, 2.0) == ("clipped", 2.0)


def test_only_whole_engines_make_the_loss_in_chunks() -> None:
    model = nano_model()
    assert Single().loss_head(model, TrainConfig()) is not None
    assert Single().loss_head(model, TrainConfig(chunked_loss=False)) is None
    assert DDP().loss_head(model, TrainConfig(compile=True)) is None
    assert FSDP2().loss_head(model, TrainConfig()) is None
    assert Engine("deepspeed").loss_head(model, TrainConfig()) is None


def test_no_sync_is_the_engines() -> None:
    acc = SimpleNamespace(no_sync=lambda model: "held")
    assert isinstance(Single().no_sync(acc, torch.nn.Linear(1, 1)), contextlib.nullcontext)
    assert DDP().no_sync(acc, torch.nn.Linear(1, 1)) == "held"
    with (
        pytest.raises(TypeError, match="not sharded"),  # FSDP2's needs a sharded model
        FSDP2().no_sync(acc, torch.nn.Linear(1, 1)),
    ):
        pass


def test_whole_checkpoints_are_written_once_sharded_ones_per_process() -> None:
    model = torch.nn.Linear(2, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loop_tree = (dict, lambda s: None)
    whole = Single().checkpoint_trees(model, opt, loop_tree)
    assert set(whole.shared) == {"loop", "optimizer"} and not whole.per_rank
    assert whole.layout is None
    sharded = FSDP2().checkpoint_trees(model, opt, loop_tree)
    assert set(sharded.per_rank) == {"loop", "model", "optimizer"} and not sharded.shared
    assert sharded.layout is not None


def test_fsdp2_gathers_only_what_it_sharded() -> None:
    with pytest.raises(RuntimeError, match="before FSDP2.prepare"):
        FSDP2().gather(SimpleNamespace(), torch.nn.Linear(1, 1))


def test_the_loop_has_no_branch_on_the_engine() -> None:
    """Every choice between engines is the engine object's: no ``if`` of loop.py tests the
    engine's kind, a sharded model or FSDP2, and loop.py does not import the FSDP2 module."""
    src = Path(loop.__file__).read_text(encoding="utf-8")
    tree = ast.parse(src)
    words = ("fsdp", "sharded", "SHARDED", "gatherer", "engine.name", "engine ==", "engine !=")
    words += ("engine in", "engine not in", "is_dtensor", "whole")
    branches = [
        f"line {node.lineno}: {ast.get_source_segment(src, node.test)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.If | ast.IfExp | ast.While)
        and any(w in (ast.get_source_segment(src, node.test) or "") for w in words)
    ]
    assert not branches, "engine branches in loop.py:\n" + "\n".join(branches)
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert "fsdp" not in imported and "UNSHARDED" not in imported
    assert set(engines.ENGINES) == {"single", "ddp", "fsdp2"}


def _state() -> LoopState:
    model = torch.nn.Linear(1, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    acc = SimpleNamespace(device="cpu")
    return LoopState(model=model, optimizer=opt, accelerator=acc, total_steps=4)


def test_request_stop_keeps_the_first_reason() -> None:
    state = _state()
    assert state.stop_reason is None
    state.request_stop("  patience spent ")
    state.request_stop("another reason")
    assert state.stop_reason == "patience spent"


@pytest.mark.parametrize("reason", ["", "   ", None, 3])
def test_request_stop_needs_a_reason(reason: object) -> None:
    with pytest.raises(ValueError, match="request_stop needs a reason"):
        _state().request_stop(reason)  # type: ignore[arg-type]


def test_the_standard_step_outside_train_says_what_is_missing() -> None:
    state = _state()
    with pytest.raises(PolymnesiaError, match="no engine"):
        standard_step(state, [{"x": torch.ones(1)}, {"x": torch.ones(1)}])


class StopAt(TrainingPlugin):
    name = "stop_at"

    def __init__(self, at: int) -> None:
        self.at = at

    def after_optimizer_step(self, state: LoopState) -> None:
        if state.step >= self.at:
            state.request_stop(f"enough after step {state.step}")


def test_a_plugin_stops_training_after_its_step_and_the_loop_says_why_once(
    tmp_path: Path, capsys
) -> None:
    _, res = train(nano_model(), data(), cfg(), tmp_path, seed=0, plugins=[StopAt(3)])
    assert res.steps == 3 and len(losses(tmp_path)) == 3
    err = capsys.readouterr().err
    assert err.count("training stopped after step 3 of 8: enough after step 3") == 1


def stop_before_step_2(state: LoopState, micro_batches: list) -> torch.Tensor:  # type: ignore[type-arg]
    loss = standard_step(state, micro_batches)
    if state.step == 1:  # the second step's gradients are made, but it must not update
        state.request_stop("the step function saw enough")
    return loss


def test_a_step_function_stops_training_before_its_update(tmp_path: Path, capsys) -> None:
    out = tmp_path / "step_fn"
    model, res = train(nano_model(), data(), cfg(), out, seed=0, step_fn=stop_before_step_2)
    assert res.steps == 1 and len(losses(out)) == 1
    assert capsys.readouterr().err.count("the step function saw enough") == 1
    # the same weights as a run a plugin stops after its first update
    one, _ = train(nano_model(), data(), cfg(), tmp_path / "plugin", seed=0, plugins=[StopAt(1)])
    for a, b in zip(model.state_dict().values(), one.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)

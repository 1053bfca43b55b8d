"""Lifelong's step merges: a step's trained model merged with the previous step's, averaged
(MERGE, plugin merge_average) or against the base (MERGE-TA, MERGE-TIES:
merging.iter_merge_step, plugins merge_ta / merge_ties), golden on tensors small enough to
check by hand; MERGE's merge gives bit for bit the weights of the averaging it replaced."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from polymnesia.continual.methods import arm_label, get_method, with_baseline
from polymnesia.errors import ConfigError
from polymnesia.experiments import load_config
from polymnesia.experiments.lifelong.protocol import Lifelong
from polymnesia.merging.maths import average, merge_step
from polymnesia.methods.step_merge import (
    STEP_MERGE_PLUGINS,
    MergeAverage,
    MergeTA,
    MergeTIES,
)
from polymnesia.training.config import EpochTrainConfig, TrainConfig
from polymnesia.training.plugins import validate_plugin_spec

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "lifelong_smoke.yaml"
HYPER = EpochTrainConfig(lr=1e-3, early_stopping={"max_epochs": 2, "patience": 1})

# theta_0 = 1 everywhere; tau_prev = (1, -3, 0.5, 3), tau_new = (3, 2, -0.5, 1)
BASE = {"w": torch.ones(4), "ids": torch.tensor([0, 1])}
PREV = {"w": torch.tensor([2.0, -2.0, 1.5, 4.0]), "ids": torch.tensor([0, 1])}
NEW = {"w": torch.tensor([4.0, 3.0, 0.5, 2.0]), "ids": torch.tensor([0, 1])}


def test_task_arithmetic_of_a_step_by_hand() -> None:
    # tau_prev + tau_new = (4, -1, 0, 4); theta_0 + 0.4 * that
    got = merge_step(BASE, PREV, NEW, "task_arithmetic", 0.4)
    assert torch.allclose(got["w"], torch.tensor([2.6, 0.6, 1.0, 2.6]))
    assert torch.equal(got["ids"], BASE["ids"])  # integer tensors are carried over
    # lam 1/2 is MERGE's averaging, (theta_prev + theta_new) / 2
    half = merge_step(BASE, PREV, NEW, "task_arithmetic", 0.5)
    assert torch.allclose(half["w"], average([PREV, NEW], [0.5, 0.5])["w"])
    assert torch.allclose(half["w"], torch.tensor([3.0, 0.5, 1.0, 3.0]))


def test_ties_of_a_step_by_hand() -> None:
    # density 0.5 keeps 2 of 4 entries: tau_prev -> (0, -3, 0, 3), tau_new -> (3, 2, 0, 0);
    # elected sign of the sums (3, -1, 0, 3): (+, -, 0, +); the disjoint mean keeps what agrees:
    # (3, -3, 0, 3) (entry 1: -3 from tau_prev; tau_new's +2 disagrees and is dropped)
    got = merge_step(BASE, PREV, NEW, "ties", 1.0, 0.5)
    assert torch.allclose(got["w"], torch.tensor([4.0, -2.0, 1.0, 4.0]))
    half = merge_step(BASE, PREV, NEW, "ties", 0.5, 0.5)
    assert torch.allclose(half["w"], torch.tensor([2.5, -0.5, 1.0, 2.5]))
    # density 1 trims nothing: sign election and disjoint mean alone give tau_m = (2, -3, 0, 2)
    full = merge_step(BASE, PREV, NEW, "ties", 1.0, 1.0)
    assert torch.allclose(full["w"], torch.tensor([3.0, -2.0, 1.0, 3.0]))


@pytest.mark.parametrize(
    ("rule", "lam", "density", "words"),
    [
        ("task_arithmetic", 0.0, 1.0, "lam must be a number > 0"),
        ("task_arithmetic", -1.0, 1.0, "lam must be a number > 0"),
        ("ties", 1.0, 0.0, "density must be in (0, 1]"),
        ("ties", 1.0, 1.5, "density must be in (0, 1]"),
        ("average", 1.0, 1.0, "accepted: task_arithmetic, ties"),
    ],
)
def test_bad_merge_options_are_one_line(rule: str, lam: float, density: float, words: str) -> None:
    with pytest.raises(ConfigError) as e:
        merge_step(BASE, PREV, NEW, rule, lam, density)
    assert words in str(e.value) and "\n" not in str(e.value)


def test_models_of_another_shape_are_refused() -> None:
    other = {"w": torch.ones(5), "ids": torch.tensor([0, 1])}
    with pytest.raises(ConfigError, match="has shape"):
        merge_step(BASE, PREV, other, "ties", 1.0, 0.2)


@pytest.mark.parametrize(
    ("plugin", "rule"), [(MergeTA(lam=0.4), "task_arithmetic"), (MergeTIES(density=0.5), "ties")]
)
def test_plugin_merges_the_trained_model_with_its_start(plugin: MergeTA, rule: str) -> None:
    model = torch.nn.Linear(2, 2)
    with torch.no_grad():
        model.weight.copy_(PREV["w"].reshape(2, 2))
        model.bias.copy_(torch.tensor([1.0, -1.0]))
    plugin.param_groups(model, [])  # training starts: the previous step's weights are kept
    with torch.no_grad():  # "training"
        model.weight.copy_(NEW["w"].reshape(2, 2))
        model.bias.copy_(torch.tensor([2.0, -3.0]))
    base = {"weight": torch.ones(2, 2), "bias": torch.zeros(2)}
    start = {"weight": PREV["w"].reshape(2, 2), "bias": torch.tensor([1.0, -1.0])}
    trained = {k: v.detach().clone() for k, v in model.state_dict().items()}
    plugin.merge_into(model, base)
    want = merge_step(base, start, trained, rule, plugin.lam, plugin.density)
    for k, v in model.state_dict().items():
        assert torch.equal(v, want[k]), k
    assert plugin.start is None  # the copy is freed


def test_merge_arms_are_forgetting_baselines_with_their_defaults() -> None:
    for name, label, plugin, options in (
        ("merge", "MERGE", "merge_average", {"weight": 0.5}),
        ("merge_ta", "MERGE-TA", "merge_ta", {"lam": 0.4}),
        ("merge_ties", "MERGE-TIES", "merge_ties", {"density": 0.2, "lam": 1.0}),
    ):
        m = get_method(name)
        assert (m.schedule, m.lora, m.baseline) == ("sequential", False, plugin)
        assert plugin in STEP_MERGE_PLUGINS
        assert m.against_forgetting and arm_label(name, 4) == label
        # no previous model on the first step: trained as VANILLA's, nothing merged
        assert with_baseline(name, HYPER, False).plugins == []
        step = with_baseline(name, HYPER, True)
        assert step.model_dump()["plugins"] == [{"name": plugin, **options}]
    # only the rules on task vectors need the base (the stage keeps a copy of it for them)
    assert {n: c.needs_base for n, c in STEP_MERGE_PLUGINS.items()} == {
        "merge_average": False,
        "merge_ta": True,
        "merge_ties": True,
    }


def test_the_arms_own_entry_sets_lam_and_density() -> None:
    own = HYPER.with_plugins({"name": "merge_ties", "density": 0.5, "lam": 0.8})
    got = with_baseline("merge_ties", own, True).model_dump()["plugins"]
    assert got == [{"name": "merge_ties", "density": 0.5, "lam": 0.8}]


def test_step_merges_are_refused_outside_lifelong_steps() -> None:
    with pytest.raises(ValueError, match="sequential_step stage only"):
        TrainConfig(plugins=[{"name": "merge_ta"}])


def test_config_override_adds_the_arms_and_bad_input_is_one_line() -> None:
    cfg = load_config(str(SMOKE), ["methods=[vanilla,merge,merge_ta,merge_ties]"])
    specs = {s.name: s for s in Lifelong.build(cfg)}
    assert specs["merge_ties_resource_0"].params.train.plugins == []
    assert specs["merge_ties_resource_1"].params.train.model_dump()["plugins"] == [
        {"name": "merge_ties", "density": 0.2, "lam": 1.0}
    ]
    assert specs["merge_resource_0"].params.train.plugins == []
    assert specs["merge_resource_2"].params.train.model_dump()["plugins"] == [
        {"name": "merge_average", "weight": 0.5}
    ]
    # MERGE's average is a step merge too: another one in its plugins would merge twice
    twice = (
        "train.overrides={merge: {lr: 1.0e-3, early_stopping: {max_epochs: 2, patience: 1}, "
        "plugins: [{name: merge_ta}]}}"
    )
    with pytest.raises(ConfigError, match="merge_ta and merge_average both merge") as e:
        Lifelong.build(load_config(str(SMOKE), ["methods=[vanilla,merge]", twice]))
    assert "\n" not in str(e.value)
    both = (
        "train.overrides={merge_ta: {lr: 1.0e-3, early_stopping: {max_epochs: 2, patience: 1}, "
        "plugins: [{name: merge_ta}, {name: merge_ties}]}}"
    )
    with pytest.raises(ConfigError, match="list at most one") as e:
        Lifelong.build(load_config(str(SMOKE), ["methods=[vanilla,merge_ta]", both]))
    assert "\n" not in str(e.value)


# --- MERGE: the average as a step merge -------------------------------------------------


def test_average_of_a_step_by_hand() -> None:
    # theta_prev = (2, -2, 1.5, 4), theta_new = (4, 3, 0.5, 2)
    for weight, want in ((0.5, [3.0, 0.5, 1.0, 3.0]), (0.25, [2.5, -0.75, 1.25, 3.5])):
        got = dict(MergeAverage(weight).merged(PREV, NEW, None))
        assert torch.equal(got["w"], torch.tensor(want)), weight
        assert torch.equal(got["ids"], PREV["ids"])  # integer tensors are carried over
    bad = {"w": PREV["w"], "ids": torch.tensor([0, 2])}
    with pytest.raises(ConfigError, match="non-float tensor ids differs"):
        dict(MergeAverage().merged(PREV, bad, None))


@pytest.mark.parametrize("weight", [0.0, 1.0, -0.5, 2.0])
def test_bad_average_weight_is_one_line(weight: float) -> None:
    with pytest.raises(ConfigError, match=r"weight must be in \(0, 1\)") as e:
        MergeAverage(weight)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="plugin merge_average: weight") as v:
        validate_plugin_spec({"name": "merge_average", "weight": weight})
    assert "\n" not in str(v.value)


class _Net(torch.nn.Module):
    """Float32, bfloat16 and float64 weights, an integer buffer and (``tied``) an output layer
    sharing the embedding's weight, as a language model's head does."""

    def __init__(self, tied: bool) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(0)
        self.emb = torch.nn.Embedding(7, 5)
        self.proj = torch.nn.Linear(5, 3)
        self.low = torch.nn.Linear(3, 2).to(torch.bfloat16)
        self.wide = torch.nn.Linear(2, 2).to(torch.float64)
        self.out = torch.nn.Linear(5, 7, bias=False)
        if tied:
            self.out.weight = self.emb.weight
        self.register_buffer("ids", torch.arange(4))
        with torch.no_grad():
            for p in self.parameters():
                p.copy_(torch.randn(p.shape, generator=gen))


def _train(model: torch.nn.Module) -> None:
    """A stand-in for a step's training: every weight moves, by seeded noise."""
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen).to(p.dtype) * 0.3)


def _cpu_copy(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("weight", [0.5, 0.3])
def test_merge_average_gives_the_weights_of_the_old_averaging(tied: bool, weight: float) -> None:
    # the path MERGE took before it was a step merge (sequential_step, up to commit 33fbc82):
    # a CPU copy of the start before training, then the whole average loaded back
    old = _Net(tied)
    start = _cpu_copy(old)
    _train(old)
    old.load_state_dict(average([start, _cpu_copy(old)], [1 - weight, weight]))
    # the plugin: its copy when the optimizer's groups are built, then merged tensor by tensor
    new = _Net(tied)
    plugin = MergeAverage(weight)
    plugin.param_groups(new, [])
    _train(new)
    plugin.merge_into(new)
    got, want = new.state_dict(), old.state_dict()
    assert list(got) == list(want)
    for k, v in want.items():
        assert got[k].dtype == v.dtype and torch.equal(got[k], v), k
    assert (new.out.weight is new.emb.weight) == tied
    assert plugin.start is None


@pytest.mark.parametrize("plugin", [MergeTA(lam=0.4), MergeTIES(density=0.5)])
def test_tied_weights_are_merged_once(plugin: MergeTA | MergeTIES) -> None:
    model = _Net(tied=True)
    base = _cpu_copy(_Net(tied=True))
    with torch.no_grad():
        for p in base.values():
            if p.is_floating_point():
                p.mul_(0.5)
    start = _cpu_copy(model)
    plugin.param_groups(model, [])
    _train(model)
    want = merge_step(base, start, _cpu_copy(model), plugin.rule, plugin.lam, plugin.density)
    plugin.merge_into(model, base)
    got = model.state_dict()
    for k, v in want.items():
        assert torch.equal(got[k], v), k


def test_the_merges_of_a_base_refuse_to_run_without_one() -> None:
    plugin = MergeTA()
    plugin.param_groups(torch.nn.Linear(2, 2), [])
    with pytest.raises(RuntimeError, match="merges against the base"):
        plugin.merge_into(torch.nn.Linear(2, 2))

"""The forgetting baselines as lifelong arms: their plugin entries and stage graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.continual.methods import arm_label, get_method, with_baseline
from polymnesia.experiments import load_config
from polymnesia.experiments.lifelong.protocol import Lifelong
from polymnesia.training.config import EpochTrainConfig

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "lifelong_smoke.yaml"
HYPER = EpochTrainConfig(lr=1e-3, early_stopping={"max_epochs": 2, "patience": 1})


def entries(train: EpochTrainConfig) -> list[dict]:
    """The plugin entries as a config (and a fingerprint) writes them."""
    return train.model_dump()["plugins"]


def test_baselines_are_sequential_full_fine_tuning_arms() -> None:
    for name, label, plugin in (
        ("l2sp", "L2-SP", "l2sp"),
        ("ewc", "EWC", "ewc"),
        ("lwf", "LwF", "distill"),
    ):
        m = get_method(name)
        assert (m.schedule, m.lora, m.baseline) == ("sequential", False, plugin)
        assert arm_label(name, 4) == label  # no LoRA rank in the label


def test_merge_is_vanilla_averaged_with_the_previous_step() -> None:
    m = get_method("merge")
    assert (m.schedule, m.lora, m.baseline) == ("sequential", False, "merge_average")
    assert m.against_forgetting
    # no previous model on the first step: trained as VANILLA's, nothing merged
    assert with_baseline("merge", HYPER, False).plugins == []
    merged = with_baseline("merge", HYPER, True)
    assert entries(merged) == [{"name": "merge_average", "weight": 0.5}]


def test_paper_methods_keep_their_hyper_unchanged() -> None:
    for name in ("multi", "mono", "vanilla", "shared_lora", "nonshared_lora"):
        assert with_baseline(name, HYPER, True) is HYPER
        assert with_baseline(name, HYPER, False) is HYPER


def test_each_step_gets_its_baseline_plugin_entry() -> None:
    first, later = with_baseline("l2sp", HYPER, False), with_baseline("l2sp", HYPER, True)
    assert entries(first) == [{"name": "l2sp", "alpha": 0.01, "beta": 0.0, "anchor_head": False}]
    assert later.plugins[0].anchor_head is True  # the head was carried over from step k-1
    assert with_baseline("ewc", HYPER, False).plugins[0].fisher is None
    assert with_baseline("ewc", HYPER, True).plugins[0].fisher == "prev"
    assert with_baseline("lwf", HYPER, False).plugins == []  # no teacher before step 1
    assert entries(with_baseline("lwf", HYPER, True)) == [
        {"name": "distill", "weight": 1.0, "temperature": 2.0}
    ]


def test_the_arms_own_entry_sets_the_hyperparameters() -> None:
    own = HYPER.with_plugins(
        {"name": "ewc", "lam": 5.0, "gamma": 0.9}, {"name": "l2sp", "alpha": 1.0}
    )
    out = with_baseline("ewc", own, True).plugins
    assert [s.plugin_name for s in out] == ["l2sp", "ewc"]
    assert out[1].lam == 5.0 and out[1].gamma == 0.9 and out[1].fisher == "prev"
    l2 = with_baseline("l2sp", own, True).plugins[-1]
    assert l2.alpha == 1.0 and l2.anchor_head is False  # as the arm set it (default)


@pytest.fixture(scope="module")
def graphs() -> tuple[dict, dict]:
    plain = load_config(str(SMOKE))
    extra = load_config(
        str(SMOKE), ["methods=[multi,mono,vanilla,shared_lora,nonshared_lora,l2sp,ewc,lwf,merge]"]
    )
    return (
        {s.name: s for s in Lifelong.build(plain)},
        {s.name: s for s in Lifelong.build(extra)},
    )


def test_new_arms_leave_the_paper_arms_stages_unchanged(graphs: tuple[dict, dict]) -> None:
    plain, extra = graphs
    for name, spec in plain.items():
        assert extra[name].params == spec.params and extra[name].inputs == spec.inputs, name


def test_new_arms_are_chains_of_steps_with_their_plugins(graphs: tuple[dict, dict]) -> None:
    _, extra = graphs
    for arm in ("l2sp", "ewc", "lwf", "merge"):
        for order in ("resource", "shuffle1", "destructive"):
            first, second = extra[f"{arm}_{order}_0"], extra[f"{arm}_{order}_1"]
            assert "prev" not in first.inputs and second.inputs["prev"] == f"{arm}_{order}_0"
    assert extra["ewc_resource_1"].params.train.plugins[0].fisher == "prev"
    assert extra["lwf_resource_0"].params.train.plugins == []

"""Forgetting baselines as two_phase arms (paper 002's protocol): config, stage graph, claims."""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.cli.main import main
from polymnesia.experiments import load_config
from polymnesia.experiments.two_phase.protocol import TwoPhase
from polymnesia.experiments.two_phase.roles import evaluated_models

CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "two_phase_smoke.yaml")
ARMS = (
    "mitigation.baselines=[{name: L2SP, method: l2sp, options: {alpha: 0.5}}, {name: LwF, method: "
    "distill}, {name: MERGE, method: merge}, {name: TIES, method: merge, options: {method: ties, "
    "density: 0.5}}]"
)


@pytest.fixture(scope="module")
def graphs() -> tuple[dict, dict]:
    plain, extra = load_config(CONFIG), load_config(CONFIG, [ARMS])
    return {s.name: s for s in TwoPhase.build(plain)}, {s.name: s for s in TwoPhase.build(extra)}


def test_baselines_start_from_phase_1_and_tune_on_the_phase_2_set(graphs) -> None:  # type: ignore[no-untyped-def]
    plain, extra = graphs
    cfg = load_config(CONFIG)
    pair = cfg.pairs[cfg.mitigation.pair]
    cft = extra[f"cft_{pair.key}"]
    for name, plugin in (
        ("L2SP", {"name": "l2sp", "alpha": 0.5, "beta": 0.0, "anchor_head": False}),
        ("LwF", {"name": "distill", "weight": 1.0, "temperature": 2.0}),
    ):
        spec = extra[f"mit_{name}"]
        assert spec.kind == "instruct" and spec.inputs == cft.inputs  # Phase 1 model, Phase 2 set
        assert spec.params.instruct.train.plugins == [plugin]
        # otherwise Phase 2 exactly as plain CFT trains it
        other = spec.params.instruct.train.model_copy(update={"plugins": []})
        assert other == cft.params.instruct.train
        assert f"eval_mit_{name}" in extra


def test_merge_arms_merge_phase_1_with_plain_cft(graphs) -> None:  # type: ignore[no-untyped-def]
    _, extra = graphs
    cfg = load_config(CONFIG)
    pair = cfg.pairs[cfg.mitigation.pair]
    avg, ties = extra["mit_MERGE"], extra["mit_TIES"]
    assert avg.kind == ties.kind == "merge_models"
    assert avg.inputs == {"model_0": f"p1_{pair.phase1}", "model_1": f"cft_{pair.key}"}
    assert avg.params.method == "average" and avg.params.weights is None
    assert ties.inputs["base"] == "pretrain" and ties.params.density == 0.5
    labels = evaluated_models(load_config(CONFIG, [ARMS]))
    assert {labels[f"mit_{n}"] for n in ("L2SP", "LwF", "MERGE", "TIES")} == {
        "L2SP",
        "LwF",
        "MERGE",
        "TIES",
    }


def test_baseline_arms_leave_every_other_stage_unchanged(graphs) -> None:  # type: ignore[no-untyped-def]
    plain, extra = graphs
    for name, spec in plain.items():
        if name.startswith("drift_"):
            continue
        assert extra[name].params == spec.params and extra[name].inputs == spec.inputs, name


@pytest.mark.parametrize(
    ("arms", "needle"),
    [
        ("[{name: X, method: ewc}]", "Input should be 'l2sp', 'distill' or 'merge'"),
        ("[{name: X, method: l2sp, options: {alpha: -1}}]", "plugin l2sp: alpha"),
        (
            "[{name: X, method: merge, options: {method: mean}}]",
            "'average', 'task_arithmetic' or 'ties'",
        ),
        ("[{name: LF_H1, method: l2sp}]", "mitigation arm names must be unique"),
    ],
)
def test_bad_baseline_arms_are_one_line(arms: str, needle: str, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["validate", CONFIG, "--set", f"mitigation.baselines={arms}"]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err

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


def test_an_ewc_arm_reads_the_fisher_of_phase_1_on_the_phase_1_set() -> None:
    cfg = load_config(
        CONFIG, ["mitigation.baselines=[{name: EWC, method: ewc, options: {lam: 5}}]"]
    )
    graph = {s.name: s for s in TwoPhase.build(cfg)}
    pair = cfg.pairs[cfg.mitigation.pair]
    fisher, arm = graph["fisher_EWC"], graph["mit_EWC"]
    assert fisher.kind == "fisher"
    assert fisher.inputs == {"model": f"p1_{pair.phase1}", "records_0": f"set_{pair.phase1}"}
    assert (fisher.params.examples, fisher.params.batch_size) == (256, 1)  # the plugin's defaults
    assert fisher.params.max_length == cfg.max_length
    cft = graph[f"cft_{pair.key}"]
    assert arm.inputs == {**cft.inputs, "fisher": "fisher_EWC"}  # from Phase 1, on the Phase 2 set
    (plugin,) = arm.params.instruct.train.plugins
    assert plugin["name"] == "ewc" and plugin["lam"] == 5 and plugin["fisher"] == "fisher"
    assert "eval_mit_EWC" in graph


def test_an_ewc_arm_without_phase_1_data_is_one_line(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    sets = [
        f"instruct_model={tmp_path}",
        "pairs=[{phase1: instruct, phase2: dissimilar}]",
        "mitigation.pair=0",
        "mitigation.baselines=[{name: EWC, method: ewc}]",
    ]
    assert main(["validate", CONFIG, *(x for s in sets for x in ("--set", s))]) == 2
    err = capsys.readouterr().err
    assert "needs the Phase 1 data for its Fisher" in err and err.count("\n") == 1, err


@pytest.mark.parametrize(
    ("arms", "needle"),
    [
        ("[{name: X, method: lwf}]", "Input should be 'l2sp', 'ewc', 'distill' or 'merge'"),
        ("[{name: X, method: ewc, options: {fisher: p1}}]", "ewc's fisher is the Phase 1"),
        ("[{name: X, method: ewc, options: {gamma: 0.5}}]", "two_phase has one previous task"),
        ("[{name: X, method: ewc, options: {lam: -1}}]", "plugin ewc: lam"),
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

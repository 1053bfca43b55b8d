"""Forgetting baselines as two_phase arms (the two-phase CFT paper's protocol): config, stage graph,
claims."""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.cli.main import main
from polymnesia.experiments import load_config
from polymnesia.experiments.two_phase.protocol import TwoPhase
from polymnesia.experiments.two_phase.roles import evaluated_models, mitigation_arms

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
        assert spec.params.instruct.train.model_dump()["plugins"] == [plugin]
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
    cfg = load_config(CONFIG)
    mitigated = f"drift_{cfg.pairs[cfg.mitigation.pair].key}"
    for name, spec in plain.items():
        if name == mitigated:  # gains the baselines' models (next test)
            continue
        assert extra[name].params == spec.params and extra[name].inputs == spec.inputs, name


def test_the_mitigated_pairs_drift_stage_draws_every_arm_baselines_included(graphs) -> None:  # type: ignore[no-untyped-def]
    plain, extra = graphs
    cfg = load_config(CONFIG, [ARMS])
    pair = cfg.pairs[cfg.mitigation.pair]
    arms = mitigation_arms(cfg)
    # the one arm list: replay, freezing, the baselines in config order, then LoRA
    assert list(arms.values()) == [
        "GR_10", "ER_10", "LF_H1", "LF_H2", "Spectrum", "L2SP", "LwF", "MERGE", "TIES", "LoRA"
    ]  # fmt: skip
    labels = evaluated_models(cfg)
    assert all(labels[stage] == name for stage, name in arms.items())  # Table 5's names
    drift = extra[f"drift_{pair.key}"]
    models = [drift.inputs[f"model_{i}"] for i in range(len(drift.params.labels))]
    assert models == [f"cft_{pair.key}", "pretrain", *arms]
    assert drift.params.labels == [f"P2 ({pair.phase1} -> {pair.phase2})", "base", *arms.values()]
    # without baselines the stage is exactly the one it was (the shipped configs' fingerprints)
    before = plain[f"drift_{pair.key}"]
    n = len(before.params.labels)
    assert before.params.labels == [*drift.params.labels[: n - 1], "LoRA"]
    assert before.params.model_copy(update={"labels": []}) == drift.params.model_copy(
        update={"labels": []}
    )
    # the other pair's drift stage has no arms
    (other,) = [p for p in cfg.pairs if p != pair]
    assert extra[f"drift_{other.key}"].params.labels == [
        f"P2 ({other.phase1} -> {other.phase2})",
        "base",
    ]


def test_no_mitigation_has_no_arms() -> None:
    cfg = load_config(CONFIG, ["mitigation=null"])
    assert mitigation_arms(cfg) == {}
    assert not any(s.startswith("mit_") for s in evaluated_models(cfg))


def test_a_baseline_named_like_the_lora_arm_is_one_line(capsys) -> None:  # type: ignore[no-untyped-def]
    arms = "mitigation.baselines=[{name: LoRA, method: l2sp}]"
    assert main(["validate", CONFIG, "--set", arms]) == 2
    err = capsys.readouterr().err
    assert "mitigation arm names must be unique" in err and err.count("\n") == 1, err
    # without the LoRA arm the name is free
    assert main(["validate", CONFIG, "--set", arms, "--set", "mitigation.lora_rank=null"]) == 0


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
    assert plugin.plugin_name == "ewc" and plugin.lam == 5 and plugin.fisher == "fisher"
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
        ("[{name: X, method: lwf}]", "unknown baseline 'lwf'; accepted: distill, ewc, l2sp, merge"),
        ("[{name: X, method: ewc, options: {fisher: p1}}]", "ewc's fisher is the Phase 1"),
        ("[{name: X, method: ewc, options: {gamma: 0.5}}]", "has one previous task"),
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

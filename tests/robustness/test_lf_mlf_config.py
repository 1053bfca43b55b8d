"""Protocol-level validation of lf_mlf configs (issue 9): each nonsense refused with one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.cli.main import main

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

#: (config, override, text the one-line refusal must hold)
REFUSED = [
    ("lf_mlf_smoke.yaml", "parts=[]", "parts must not be empty"),
    ("lf_mlf_smoke.yaml", "parts=[main,main]", "listed twice in parts"),
    ("lf_mlf_smoke.yaml", "seeds=[]", "seeds must not be empty"),
    ("lf_mlf_smoke.yaml", "seeds=[0,-1]", "non-negative"),
    ("lf_mlf_smoke.yaml", "seeds=[1,1]", "listed twice in seeds"),
    ("lf_mlf_smoke.yaml", "methods=[]", "methods must not be empty"),
    ("lf_mlf_smoke.yaml", "methods=[uniform,uniform]", "listed twice in methods"),
    ("lf_mlf_smoke.yaml", "sources=[en,de,en]", "listed twice in sources"),
    ("lf_mlf_smoke.yaml", "sources=[en,xx]", "xx"),
    ("lf_mlf_smoke.yaml", "targets=[]", "targets must not be empty"),
    ("lf_mlf_smoke.yaml", "targets=[es,es]", "listed twice in targets"),
    ("lf_mlf_smoke.yaml", "task.name=''", "task.name"),
    ("lf_mlf_smoke.yaml", "method_options.lf_mlf.solver=false", "method_options.lf_mlf.solver"),
    ("lf_mlf_smoke.yaml", "method_options.lf_mlf.on_infeasible=null", "on_infeasible"),
    ("lf_mlf_smoke.yaml", "method_options.lf_mlf.solver=nope", "nope"),
    ("lf_mlf_smoke.yaml", "method_options.gradvac.beta=xx", "method_options.gradvac.beta"),
    ("lf_mlf_smoke.yaml", "method_options.gradvac.beta=2", "beta"),
    ("lf_mlf_smoke.yaml", "method_options.gradvac.granularity={a: 1}", "granularity"),
    ("lf_mlf_smoke.yaml", "method_options.pcgrad.bogus=1", "bogus"),
    ("lf_mlf_smoke.yaml", "parts=[main,sweep]", "no sweep section"),
    ("lf_mlf_smoke.yaml", "friedman.blocks=tasks", "needs at least 2 tasks"),
    ("lf_mlf_smoke.yaml", "evaluate.forgetting_languages=[]", "must not be empty"),
    ("lf_mlf_smoke.yaml", "evaluate.forgetting_languages=[en,ja]", "not data languages"),
    ("lf_mlf_smoke.yaml", "task.kind=span", "does not fit kind 'span'"),
    ("lf_mlf_sources_sweep.yaml", "sweep.counts=[]", "sweep.counts must not be empty"),
    ("lf_mlf_sources_sweep.yaml", "sweep.counts=[2,2]", "listed twice in sweep.counts"),
    ("lf_mlf_sources_sweep.yaml", "sweep.counts=[1]", "sweep.counts must lie in"),
    ("lf_mlf_sources_sweep.yaml", "sweep.methods=[]", "sweep.methods must not be empty"),
    ("lf_mlf_sources_sweep.yaml", "sweep.methods=[uniform,nope]", "nope"),
    ("lf_mlf_sources_sweep.yaml", "sweep.ranking=[en,de,en]", "listed twice in sweep.ranking"),
    ("lf_mlf_sources_sweep.yaml", "sweep.ranking=[en,de,qq]", "qq"),
    ("lf_mlf_sources_sweep.yaml", "sweep=null", "no sweep section"),
    ("lf_mlf_branches.yaml", "branches.methods=[]", "branches.methods must not be empty"),
    ("lf_mlf_branches.yaml", "branches.methods=[uniform,zz]", "zz"),
    (
        "lf_mlf_branches.yaml",
        "branches.groups.Germanic=[]",
        "branches.groups.Germanic must not be empty",
    ),
    ("lf_mlf_branches.yaml", "branches.groups.Germanic=[en,qq]", "qq"),
    ("lf_mlf_branches.yaml", "branches.groups.Germanic=[en,de,en]", "listed twice"),
    (
        "lf_mlf_branches.yaml",
        "branches.groups.Germanic=[en,fr]",
        "branches 'Germanic' and 'Italic'",
    ),
    ("lf_mlf_branches.yaml", "branches.groups={}", "at least 2 branches"),
    ("lf_mlf_branches.yaml", "branches=null", "no branches section"),
    ("lf_mlf_tasks.yaml", "tasks=[]", "tasks must not be empty"),
    ("lf_mlf_tasks.yaml", "task.name=ner", "give either task (one) or tasks (several)"),
]


@pytest.mark.parametrize(("config", "override", "expected"), REFUSED)
def test_lf_mlf_nonsense_is_refused_in_one_line(
    config: str, override: str, expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(CONFIGS / config), override, "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("polymnesia: error:") and len(err.splitlines()) == 1, err
    assert expected in err, err


def test_a_run_folder_of_several_tasks_written_with_the_default_task_still_loads(
    tmp_path: Path,
) -> None:
    """config.yaml of runs made before the resolved config left ``task`` out next to ``tasks``."""
    from polymnesia.experiments.loading import load_config
    from polymnesia.io import atomic_write_yaml

    cfg = load_config(CONFIGS / "lf_mlf_tasks.yaml")
    assert "task" not in cfg.model_dump(mode="json")
    old = {**cfg.model_dump(mode="json"), "task": cfg.task.model_dump(mode="json")}
    atomic_write_yaml(tmp_path / "config.yaml", old)
    assert load_config(tmp_path / "config.yaml").model_dump(mode="json") == cfg.model_dump(
        mode="json"
    )


@pytest.mark.parametrize(
    "override",
    [
        "targets=null",  # every other pretraining language
        "method_options.gradvac.beta=0.5",
        "friedman.blocks=languages",
        "seeds=[0]",
    ],
)
def test_lf_mlf_sensible_values_are_accepted(override: str) -> None:
    assert main(["run", str(CONFIGS / "lf_mlf.yaml"), override, "--dry-run"]) == 0


def test_paper_config_validates_offline_and_names_its_tasks() -> None:
    from polymnesia.experiments.loading import load_config

    cfg = load_config(CONFIGS / "lf_mlf_paper.yaml")
    assert [t.name for t in cfg.task_list()] == ["panx_ner", "tydiqa_goldp", "xnli"]
    assert cfg.sources_of(cfg.task_list()[1]) == ["en", "ru"]
    assert cfg.friedman.blocks == "tasks"


def test_fuzzer_empty_lists_and_negative_seeds_are_refused_in_lf_mlf(tmp_path: Path) -> None:
    """Every list of an lf_mlf config emptied, and negative seeds, are refused (issue 9)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from fuzz_configs import mutations, run_one

    import polymnesia.stages  # noqa: F401

    chosen = [
        m
        for m in mutations(seed=0, per_config=40)
        if m.config.startswith("lf_mlf")
        and (m.kind == "empty_list" or (m.kind == "negative" and m.path.startswith("seeds")))
    ]
    assert len(chosen) >= 20
    outcomes = [run_one(m, tmp_path, dry_run=False) for m in chosen]
    wrong = [
        f"{o.mutation.config} {o.mutation.path}: {o.result} {o.detail}"
        for o in outcomes
        if o.result != "refused"
    ]
    assert not wrong, "\n".join(wrong)

"""The new_token_init config and pipeline: one-line refusals, shared stages, the arms."""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.cli.main import main
from polymnesia.experiments import EXPERIMENTS
from polymnesia.experiments.loading import load_config
from polymnesia.stages.relearn_new_tokens import RelearnParams
from polymnesia.stages.static_embeddings import StaticEmbeddingsParams

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
SMOKE = str(CONFIGS / "new_token_init_smoke.yaml")


def refused(capsys: pytest.CaptureFixture[str], *overrides: str) -> str:
    rc = main(["run", SMOKE, *overrides, "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["relearn.inits=[mean,focu]"], "unknown init 'focu' in relearn.inits; accepted:"),
        (["relearn.inits=[focus,align]"], "must include 'mean'"),
        (["relearn.inits=[mean,mean]"], "listed twice in relearn.inits"),
        (["relearn.eval_at=[0]"], "relearn.eval_at [0] must lie strictly between 0 and"),
        (["relearn.eval_at=[9]"], "relearn.train.steps (4)"),
        (["relearn.eval_at=[2,2]"], "listed twice in relearn.eval_at"),
        (["relearn.head=drop"], "relearn.head"),
        (["bases=[{name: a}, {name: a}]"], "a base name is listed twice in bases"),
        (["bases=[{name: 'b c'}]"], "base name 'b c' must start with a letter"),
        (["bases=[]"], "bases"),
        (["groups.adapting=[]"], "groups.adapting is empty"),
        (["model.name_or_path=gpt2"], "model.name_or_path is not accepted"),
        (["bases=[{name: af, forgetting: {reset_every: 40}}]"], "reset_every"),
    ],
)
def test_new_token_init_refuses_in_one_line(
    isolated_cache: Path, capsys: pytest.CaptureFixture[str], overrides: list[str], needle: str
) -> None:
    assert needle in refused(capsys, *overrides)


def test_the_pipeline_shares_the_vocabulary_and_crosses_bases_with_inits() -> None:
    cfg = load_config(SMOKE)
    specs = {s.name: s for s in EXPERIMENTS.get("new_token_init").build(cfg)}
    vocab = specs["vocabulary"]
    assert vocab.kind == "static_embeddings" and dict(vocab.inputs) == {
        "data": "data",
        "tokenizer": "tokenizer",
    }
    side = vocab.params
    assert isinstance(side, StaticEmbeddingsParams)
    # focus needs static, wechsel static and source_static, align alignments: computed once
    assert side.needs == ["static", "source_static", "alignment"]
    relearn = [s for s in specs.values() if s.kind == "relearn_new_tokens"]
    assert sorted(s.name for s in relearn) == sorted(
        f"relearn_{b}_{i}"
        for b in ("standard", "af")
        for i in ("mean", "subtoken_mean", "focus", "align", "wechsel")
    )
    for s in relearn:
        base = s.name.split("_")[1]
        assert dict(s.inputs) == {
            "data": "data",
            "model": f"pretrain_{base}",
            "vocabulary": "vocabulary",
        }
        assert isinstance(s.params, RelearnParams) and s.params.steps() == [0, 2, 4]
        assert s.params.languages == {"en": "pretraining", "es": "pretraining", "fr": "adapting"}
    plugins = [p.plugin_name for p in specs["pretrain_af"].params.train.plugins]
    assert plugins == ["active_forgetting"] and not specs["pretrain_standard"].params.train.plugins


def test_inits_without_side_data_need_none() -> None:
    cfg = load_config(SMOKE, ["relearn.inits=[mean,normal,subtoken_mean]"])
    specs = {s.name: s for s in EXPERIMENTS.get("new_token_init").build(cfg)}
    assert specs["vocabulary"].params.needs == []


def test_seeds_fan_out_and_share_only_the_data() -> None:
    cfg = load_config(SMOKE, ["seeds=[0,1]"])
    names = [s.name for s in EXPERIMENTS.get("new_token_init").build(cfg)]
    assert "data.seed1" not in names and "vocabulary.seed1" in names
    assert "relearn_af_wechsel.seed1" in names

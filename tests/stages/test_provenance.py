"""What stage kinds' parameters say of the models they write (``Stage.provenance``), and the
lineage and evaluations a model card reads from a pipeline's specs, on a shipped config's
stages (built, not run)."""

from __future__ import annotations

from polymnesia.experiments.export import ancestors, evaluations_of
from polymnesia.experiments.preflight import check_config
from polymnesia.pipeline.stage import STAGES, Provenance


def test_lineage_languages_sources_and_evaluations_of_an_instructed_model() -> None:
    cfg, built = check_config("configs/active_forgetting_smoke.yaml")
    specs = {s.name: s for s in built}
    lineage = [*ancestors(specs, "instruct_AFA"), "instruct_AFA"]
    assert [specs[n].kind for n in lineage if "model/" in STAGES.get(specs[n].kind).outputs] == [
        "pretrain",
        "adapt_vocabulary",
        "instruct",
    ]
    said = [STAGES.get(specs[n].kind).provenance(specs[n].params) for n in lineage]
    languages = list(dict.fromkeys(lang for p in said for lang in p.languages))
    assert languages == [*cfg.groups.pretraining, *cfg.groups.adapting]  # en, es; fr (+ en)
    assert {name for p in said for name, _ in p.sources} == {cfg.data.source}
    assert not any(p.base_models for p in said)  # trained from scratch
    assert evaluations_of(specs, "instruct_AFA") == ["translation_AFA", "zero_shot_AFA"]
    assert evaluations_of(specs, "pretrain") == ["lm_Baseline", "isotropy_Baseline"]


def test_a_model_named_by_its_section_is_a_base_model() -> None:
    _, built = check_config("configs/quickstart.yaml", ["model.name_or_path=gpt2"])
    pretrain = next(s for s in built if s.kind == "pretrain")
    said = STAGES.get("pretrain").provenance(pretrain.params)
    assert said.base_models == ("gpt2",)
    assert STAGES.get("merge_models").provenance(None) == Provenance()  # says nothing itself

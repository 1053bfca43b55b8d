"""The model card composed from hand-made facts and score records, read back with
huggingface_hub's own parser."""

from __future__ import annotations

from huggingface_hub import ModelCard

from polymnesia.reports.model_card import CardFacts, DataSource, model_card, pipeline_tag
from polymnesia.results import Score

FP = "ab" * 32
CONFIG = "cd" * 32


def facts(**changes: object) -> CardFacts:
    base: dict[str, object] = dict(
        run_name="demo",
        protocol="two_phase",
        stage="phase2",
        kind="instruct",
        fingerprint=FP,
        config_hash=CONFIG,
        kind_version="3",
        description="English then multilingual instruction tuning",
        languages=("en", "de", "sw"),
        base_models=("mistralai/Mistral-7B-v0.1",),
        sources=(
            DataSource("bible", "public-domain editions where a language has one"),
            DataSource("hf", "see the dataset card on the Hugging Face Hub", "facebook/belebele"),
        ),
        lineage=(("base", "import_model"), ("phase1", "instruct"), ("phase2", "instruct")),
        architecture="MistralForCausalLM",
        train_summary={"steps": 120, "final_loss": 1.2345678, "seconds": 61.5, "engine": "fsdp2"},
        scores=(
            Score(
                "CFT",
                "de",
                "accuracy",
                0.61,
                task="belebele",
                ci_low=0.55,
                ci_high=0.67,
                n=900,
                stage="ea_phase2",
            ),
            Score("CFT", "sw", "acc", 0.42, task="xnli", stderr=0.013, stage="ma_phase2"),
        ),
    )
    base.update(changes)
    return CardFacts(**base)  # type: ignore[arg-type]


def test_front_matter_reads_back_with_huggingface_hub() -> None:
    card = ModelCard(model_card(facts()))
    data = card.data.to_dict()
    assert data["language"] == ["en", "de", "sw"]
    assert data["base_model"] == "mistralai/Mistral-7B-v0.1"
    assert data["datasets"] == ["facebook/belebele"]  # Hub ids only: bible has none
    assert data["license"] == "other" and data["license_name"] == "training-data-terms"
    assert data["library_name"] == "transformers"
    assert data["pipeline_tag"] == "text-generation"
    assert data["tags"] == ["polymnesia", "two_phase", "instruct"]
    block = data["polymnesia"]
    assert block["stage_fingerprint"] == FP and block["config_hash"] == CONFIG
    assert block["stage"] == "phase2" and block["sources"] == ["bible", "hf"]


def test_body_has_protocol_fingerprints_training_and_scores_with_intervals() -> None:
    text = ModelCard(model_card(facts())).text
    assert "`two_phase`" in text and FP in text and CONFIG in text
    assert "(`instruct` version 3)" in text
    assert "| optimizer steps | 120 |" in text and "| final training loss | 1.235 |" in text
    assert "| engine | fsdp2 |" in text
    assert "| ea_phase2 | belebele | accuracy | de |  | 0.61 | [0.55, 0.67] | 900 |" in text
    assert "| ma_phase2 | xnli | acc | sw |  | 0.42 | ± 0.013 (s.e.) |  |" in text
    assert "`base` (import_model) → `phase1` (instruct) → `phase2` (instruct)" in text
    assert "`mistralai/Mistral-7B-v0.1` (Hugging Face Hub)" in text
    assert "- `hf` (facebook/belebele): see the dataset card" in text
    assert "AutoModelForCausalLM.from_pretrained" in text


def test_a_given_licence_replaces_other_and_its_explanation() -> None:
    data = ModelCard(model_card(facts(license="apache-2.0"))).data.to_dict()
    assert data["license"] == "apache-2.0" and "license_name" not in data
    assert "exporter gave the licence `apache-2.0`" in model_card(facts(license="apache-2.0"))


def test_a_model_from_scratch_without_scores_or_training_says_so() -> None:
    text = model_card(facts(base_models=(), sources=(), scores=(), train_summary={}, languages=()))
    data = ModelCard(text).data.to_dict()
    assert "base_model" not in data and "datasets" not in data and "language" not in data
    assert "Trained from scratch." in text
    assert "No evaluation of this stage's model is recorded" in text
    assert "trains nothing itself" in text


def test_setting_and_step_columns_appear_only_when_records_have_them() -> None:
    plain = model_card(facts())
    assert "| setting |" not in plain and "| step |" not in plain
    stepped = (Score("af", "fr", "bits_per_byte", 3.2, step=50, setting="mean", stage="relearn"),)
    text = model_card(facts(scores=stepped))
    assert "| evaluation | task | metric | setting | step | language |" in text
    assert "| relearn | lm | bits_per_byte | mean | 50 | fr |" in text


def test_pipeline_tags_follow_the_architecture() -> None:
    assert pipeline_tag("XLMRobertaForMaskedLM") == "fill-mask"
    assert pipeline_tag("XLMRobertaForSequenceClassification") == "text-classification"
    assert pipeline_tag("LlamaForCausalLM") == "text-generation"
    assert pipeline_tag("SomethingElse") is None and pipeline_tag(None) is None
    card = model_card(facts(architecture="XLMRobertaForTokenClassification"))
    assert "AutoModelForTokenClassification.from_pretrained" in card

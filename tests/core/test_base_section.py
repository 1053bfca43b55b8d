"""The shared base-model section: ``pretrain: false`` imports the named model as it is."""

from __future__ import annotations

import pytest

from polymnesia.data.config import DataConfig
from polymnesia.experiments.sections import BaseModelSection
from polymnesia.experiments.shared import PRETRAIN, base_stages


def test_pretrained_base_is_data_tokenizer_and_pretraining() -> None:
    base = BaseModelSection(languages=["en", "fr"])
    specs = base_stages(base, DataConfig(), ["en", "fr", "de"], seed=0)
    assert [(s.name, s.kind) for s in specs] == [
        ("data", "prepare_data"),
        ("tokenizer", "train_tokenizer"),
        (PRETRAIN, "pretrain"),
    ]


def test_pretrain_false_imports_the_loaded_model_under_the_pretraining_name() -> None:
    base = BaseModelSection(
        languages=["en"],
        pretrain=False,
        model={"name_or_path": "FacebookAI/xlm-roberta-base"},  # type: ignore[arg-type]
        tokenizer={"name_or_path": "FacebookAI/xlm-roberta-base"},  # type: ignore[arg-type]
    )
    specs = base_stages(base, DataConfig(), ["en", "fr"], seed=0)
    assert [(s.name, s.kind) for s in specs] == [
        ("data", "prepare_data"),
        (PRETRAIN, "import_model"),
    ]
    params = specs[1].params
    assert params.model.name_or_path == "FacebookAI/xlm-roberta-base"  # type: ignore[attr-defined]
    assert params.tokenizer == "FacebookAI/xlm-roberta-base"  # type: ignore[attr-defined]


def test_pretrain_false_needs_a_model_to_load() -> None:
    with pytest.raises(ValueError, match="set model.name_or_path"):
        BaseModelSection(languages=["en"], pretrain=False)

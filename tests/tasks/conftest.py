"""Fixtures for the task layer: a tiny BPE and a nano Mistral saved as a model folder."""

from __future__ import annotations

from pathlib import Path

import pytest

TEXTS = [
    "In the beginning God created the heavens and the earth.",
    "Am Anfang schuf Gott den Himmel und die Erde.",
    "Au commencement Dieu créa les cieux et la terre.",
    "And the earth was waste and void and darkness was upon the face of the deep.",
    "Und die Erde war wüst und leer, und Finsternis war über der Tiefe.",
    "La terre était informe et vide: il y avait des ténèbres à la surface de l'abîme.",
] * 20


@pytest.fixture(scope="session")
def tiny_tok():  # type: ignore[no-untyped-def]
    from polymnesia.tokenizers.bpe import train_bpe

    return train_bpe(TEXTS, 400)


@pytest.fixture(scope="session")
def lm_folder(tiny_tok, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    from polymnesia.models import ModelConfig
    from polymnesia.models.build import build_model
    from polymnesia.models.io import save_model_and_tokenizer

    entry = tmp_path_factory.mktemp("pretrain_entry")
    model = build_model(ModelConfig(preset="nano", max_position_embeddings=128), tiny_tok, seed=0)
    save_model_and_tokenizer(model, tiny_tok, entry / "model")
    return entry

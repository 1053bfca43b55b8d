"""A tiny Mistral + BPE tokenizer folder for metric tests that run real models."""

from __future__ import annotations

from pathlib import Path

TEXTS = [
    "In the beginning God created the heavens and the earth.",
    "The earth was formless and empty.",
    "Au commencement, Dieu créa les cieux et la terre.",
    "La terre était informe et vide.",
    "Im Anfang schuf Gott Himmel und Erde.",
    "Und die Erde war wüst und leer.",
] * 4


def model_folder(folder: Path, seed: int = 0, layers: int = 2) -> Path:
    from polymnesia.testing import save_tiny, tiny_bpe

    tok = tiny_bpe(TEXTS, 300, model_max_length=64)
    return save_tiny(
        folder, "mistral", tok, num_hidden_layers=layers, max_position_embeddings=64, seed=seed
    )

"""A tiny Mistral + BPE tokenizer folder for metric tests that run real models."""

from __future__ import annotations

from pathlib import Path

import torch

TEXTS = [
    "In the beginning God created the heavens and the earth.",
    "The earth was formless and empty.",
    "Au commencement, Dieu créa les cieux et la terre.",
    "La terre était informe et vide.",
    "Im Anfang schuf Gott Himmel und Erde.",
    "Und die Erde war wüst und leer.",
] * 4


def model_folder(folder: Path, seed: int = 0, layers: int = 2) -> Path:
    from transformers import MistralConfig, MistralForCausalLM

    from polymnesia.stages.common import save_model_and_tokenizer
    from polymnesia.tokenizers import train_bpe

    tok = train_bpe(TEXTS, 300, model_max_length=64)
    conf = MistralConfig(
        vocab_size=len(tok),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        sliding_window=None,
        bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed)
    save_model_and_tokenizer(MistralForCausalLM(conf), tok, folder)
    return folder

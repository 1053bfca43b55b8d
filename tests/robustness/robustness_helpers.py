"""A two-stage pipeline (UDHR data, a 300-token BPE) that runs in about a second."""

from __future__ import annotations

from pathlib import Path

import polymnesia.stages  # noqa: F401  (registers the stage kinds)
from polymnesia.data.config import DataConfig
from polymnesia.pipeline.stage import StageSpec
from polymnesia.stages.data import PrepareDataParams
from polymnesia.stages.tokenizer import TrainTokenizerParams
from polymnesia.tokenizers.config import TokenizerConfig


def tiny_specs(langs: tuple[str, ...] = ("en", "fr")) -> list[StageSpec]:
    data = PrepareDataParams(
        data=DataConfig(source="udhr", max_train_per_lang=60, max_eval_per_lang=10),
        languages=list(langs),
    )
    tok = TrainTokenizerParams(
        tokenizer=TokenizerConfig(vocab_size=300, temperature=1.0, sample_texts=120),
        languages=list(langs),
    )
    return [
        StageSpec("data", "prepare_data", data),
        StageSpec("tokenizer", "train_tokenizer", tok, {"data": "data"}),
    ]


def flip_byte(path: Path, *, keep_mtime: bool) -> None:
    """Change one byte in the middle of ``path`` (same size); optionally restore its mtime."""
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    if keep_mtime:
        import os

        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))

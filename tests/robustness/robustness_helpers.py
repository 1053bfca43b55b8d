"""A two-stage pipeline (UDHR data, a 300-token BPE) that runs in about a second."""

from __future__ import annotations

from pathlib import Path

import polymnesia.stages  # noqa: F401  (registers the stage kinds)
from polymnesia.pipeline.stage import StageSpec
from polymnesia.stages.data import PrepareDataParams
from polymnesia.stages.tokenizer import TrainTokenizerParams


def tiny_specs(langs: tuple[str, ...] = ("en", "fr")) -> list[StageSpec]:
    data = PrepareDataParams(
        source="udhr", languages=list(langs), max_train_per_lang=60, max_eval_per_lang=10
    )
    tok = TrainTokenizerParams(
        languages=list(langs), vocab_size=300, temperature=1.0, sample_texts=120
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

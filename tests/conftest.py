"""Shared fixtures: an isolated cache per test session and tiny tokenizers/models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh POLYMNESIA_CACHE for tests that must not see other runs' stages.

    The Bible download is shared: its data folder is linked from the user's cache.
    """
    from polymnesia.paths import cache_dir

    real = cache_dir()
    cache = tmp_path / "cache"
    (cache / "data").mkdir(parents=True)
    if (real / "data" / "bible").exists():
        (cache / "data" / "bible").symlink_to(real / "data" / "bible")
    monkeypatch.setenv("POLYMNESIA_CACHE", str(cache))
    return cache


@pytest.fixture(scope="session")
def make_tok_model():  # type: ignore[no-untyped-def]
    """Factory: a tiny BPE trained on ``sentences`` and a 16-wide, 1-layer Mistral (seed 0) for
    it.
    """

    def make(sentences: list[str]):  # type: ignore[no-untyped-def]
        from polymnesia.testing import tiny_bpe, tiny_model

        tok = tiny_bpe(sentences, 300, repeat=30)
        return tok, tiny_model("mistral", len(tok), pad_token_id=tok.pad_token_id)

    return make

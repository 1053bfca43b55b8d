"""Two CPU processes (gloo) score their shards of the evaluation texts and gather: the
evaluation stages give the same scores as one process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from polymnesia.io import write_jsonl_atomic
from polymnesia.models.io import save_model_and_tokenizer
from polymnesia.testing import special_ids, tiny_model, tiny_sentencepiece

TEXTS = {
    "en": [
        "In the beginning God created the heaven and the earth.",
        "And God said, Let there be light: and there was light.",
        "The Lord is my shepherd; I shall not want.",
        "Jesus wept.",
        "God is love, and the light of the world.",
    ],
    "fr": [
        "Au commencement, Dieu créa les cieux et la terre.",
        "Dieu dit: Que la lumière soit! Et la lumière fut.",
        "L'Éternel est mon berger: je ne manquerai de rien.",
        "Jésus pleura.",
        "Dieu est amour, et la lumière du monde.",
    ],
}
GENRES = ["law", "law", "wisdom", "gospels", "history"]


def _write_data(folder: Path) -> None:
    for lang, texts in TEXTS.items():
        rows = [
            {"id": f"v{i}", "lang": lang, "text": t, "label": None, "meta": {"genre": g}}
            for i, (t, g) in enumerate(zip(texts, GENRES, strict=True))
        ]
        for split in ("train", "test"):
            write_jsonl_atomic(folder / "data" / lang / f"{split}.jsonl", rows)


def _one_and_two(script: str, folder: Path) -> dict[str, Any]:
    """What ``script`` saves when run as one process and as two (gloo)."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launchers = {
        "one": [sys.executable],
        "two": [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"],
    }
    scores = {}
    for name, launcher in launchers.items():
        res = subprocess.run(
            [*launcher, str(Path(__file__).parent / script), str(folder), str(folder / name)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert res.returncode == 0, res.stderr[-3000:]
        scores[name] = json.loads((folder / name / "scores.json").read_text())
    return scores


def test_two_processes_score_like_one(make_tok_model, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    tok, model = make_tok_model([t for ts in TEXTS.values() for t in ts])
    save_model_and_tokenizer(model, tok, tmp_path / "model" / "model")
    _write_data(tmp_path)
    scores = _one_and_two("eval_two_procs.py", tmp_path)
    for stage, one in scores["one"].items():
        two = scores["two"][stage]
        assert len(one) == len(two) > 0, stage
        for a, b in zip(one, two, strict=True):
            assert (a["lang"], a["metric"]) == (b["lang"], b["metric"])
            # the same model: only the order of the float sums over texts differs (a few ulps);
            # 1e-5 relative is 80 float32 ulps
            assert b["value"] == pytest.approx(a["value"], rel=1e-5, abs=1e-8), (stage, a["metric"])
        if stage.startswith("task_"):  # every prediction, gathered in input order
            assert [s["extra"] for s in one] == [s["extra"] for s in two], stage
        if stage == "translation":  # the gathered hypotheses are the same, in the same order
            assert [s["extra"]["sample_hyp"] for s in one] == [
                s["extra"]["sample_hyp"] for s in two
            ]


def test_two_processes_mask_and_score_like_one(tmp_path: Path) -> None:
    """The masked-LM loss (F_p of an encoder): masks depend on the text alone, so sharding
    the texts over two processes changes no per-text loss and no stage score."""
    tok, _ = tiny_sentencepiece([t for ts in TEXTS.values() for t in ts] * 20, 120, "unigram")
    model = tiny_model("xlm-roberta", len(tok), **special_ids(tok))
    save_model_and_tokenizer(model, tok, tmp_path / "model" / "model")
    _write_data(tmp_path)
    got = _one_and_two("mlm_two_procs.py", tmp_path)
    one, two = got["one"], got["two"]
    assert (
        one["columns"]["tokens"] == two["columns"]["tokens"] and min(one["columns"]["tokens"]) >= 1
    )
    assert two["columns"]["nll"] == pytest.approx(one["columns"]["nll"], rel=1e-5)
    assert [(s["lang"], s["metric"]) for s in one["stage"]] == [
        ("en", "mlm_loss"),
        ("fr", "mlm_loss"),
    ]
    for a, b in zip(one["stage"], two["stage"], strict=True):
        assert b["value"] == pytest.approx(a["value"], rel=1e-5) and a["extra"] == b["extra"]

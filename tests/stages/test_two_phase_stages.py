"""The paper-002 stages on a tiny model: replay mixing, DES/MPD, representation drift, LoRA
instruction tuning merged into a plain model folder."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from polymnesia.io import read_jsonl, write_jsonl_atomic
from polymnesia.models.io import load_model_and_tokenizer, save_model_and_tokenizer
from polymnesia.pipeline.stage import StageContext, StageSpec
from polymnesia.stages.drift import DriftConfig, DriftParams, RepresentationDrift
from polymnesia.stages.instruct import Instruct, InstructConfig, InstructParams
from polymnesia.stages.replay_data import ReplayConfig, ReplayData, ReplayDataParams
from polymnesia.stages.similarity import ModelDistance, ModelDistanceParams
from polymnesia.training.config import TrainConfig

TEXTS = [
    "In the beginning God created the heavens and the earth.",
    "And the earth was without form and void.",
    "Blessed is the man that walketh not in the counsel of the ungodly.",
    "The Lord is my shepherd I shall not want.",
    "He maketh me to lie down in green pastures.",
    "He leadeth me beside the still waters.",
]


def _records(n: int, tag: str) -> list[dict[str, str]]:
    return [
        {"instruction": f"{tag} task {i}: repeat", "input": TEXTS[i % 6], "output": TEXTS[i % 6]}
        for i in range(n)
    ]


def _ctx(tmp: Path, name: str, params: object, inputs: dict[str, Path]) -> StageContext:
    out = tmp / name
    out.mkdir(parents=True)
    return StageContext(StageSpec(name, "x", params, {k: k for k in inputs}), out, inputs)


@pytest.fixture
def folders(make_tok_model, tmp_path: Path):  # type: ignore[no-untyped-def]
    tok, model = make_tok_model(TEXTS)
    save_model_and_tokenizer(model, tok, tmp_path / "base" / "model")
    write_jsonl_atomic(tmp_path / "p2" / "records.jsonl", _records(20, "p2"))
    write_jsonl_atomic(tmp_path / "pool" / "records.jsonl", _records(10, "en"))
    rows = [
        {"id": str(i), "lang": "en", "text": t, "label": None, "meta": {}}
        for i, t in enumerate(TEXTS)
    ]
    write_jsonl_atomic(tmp_path / "data" / "en" / "test.jsonl", rows)
    return tmp_path


def test_english_replay_mixes_the_share(folders: Path) -> None:
    params = ReplayDataParams(replay=ReplayConfig(kind="english", share=0.1))
    ctx = _ctx(folders, "er", params, {"records": folders / "p2", "pool": folders / "pool"})
    ReplayData().run(ctx)
    rows = read_jsonl(ctx.out_dir / "records.jsonl")
    assert len(rows) == 22 and sum(r["replay"] for r in rows) == 2  # round(0.1 * 20)
    assert all(r["instruction"].startswith("en") for r in rows if r["replay"])


def test_generative_replay_answers_with_the_phase1_model(folders: Path) -> None:
    params = ReplayDataParams(replay=ReplayConfig(kind="generative", share=0.1, max_new_tokens=4))
    inputs = {"records": folders / "p2", "pool": folders / "pool", "model": folders / "base"}
    ctx = _ctx(folders, "gr", params, inputs)
    ReplayData().run(ctx)
    replayed = [r for r in read_jsonl(ctx.out_dir / "records.jsonl") if r["replay"]]
    originals = {r["output"] for r in _records(10, "en")}
    assert len(replayed) == 2 and all(r["output"] not in originals for r in replayed)


def test_model_distance_is_zero_for_the_same_model(folders: Path) -> None:
    ctx = _ctx(
        folders,
        "mpd",
        ModelDistanceParams(label="x"),
        {"a": folders / "base", "b": folders / "base"},
    )
    (score,) = ModelDistance().run(ctx)
    assert score.metric == "mpd" and score.value == 0.0


def test_drift_scores_every_layer_and_writes_tsne(folders: Path) -> None:
    params = DriftParams(
        drift=DriftConfig(prompts=6, include_embeddings=True), reference_label="P1", labels=["P2"]
    )
    inputs = {"reference": folders / "base", "model_0": folders / "base", "data": folders / "data"}
    ctx = _ctx(folders, "drift", params, inputs)
    scores = RepresentationDrift().run(ctx)
    whole = [s for s in scores if s.metric == "covariance_drift"]
    layers = [s for s in scores if s.metric == "layer_covariance_drift"]
    assert whole[0].value == pytest.approx(0.0, abs=1e-12) and len(layers) == 2
    tsne = json.loads((ctx.out_dir / "tsne.json").read_text())
    assert set(tsne) == {"P1", "P2"} and np.asarray(tsne["P1"]).shape == (2, 2)


def test_lora_instruct_merges_into_a_plain_model(folders: Path) -> None:
    train = TrainConfig(steps=2, batch_size=2, lr=1e-2, progress_bar=False, checkpoint_at_end=False)
    cfg = InstructConfig(max_length=512, train=train, lora_rank=2)
    params = InstructParams(instruct=cfg, records=["records"])
    ctx = _ctx(folders, "lora", params, {"records": folders / "p2", "model": folders / "base"})
    Instruct().run(ctx)
    base, _ = load_model_and_tokenizer(folders / "base" / "model")
    tuned, _ = load_model_and_tokenizer(ctx.out_dir / "model")
    names = [n for n, _ in tuned.named_parameters()]
    assert names == [n for n, _ in base.named_parameters()]  # no adapter left: merged
    before, after = dict(base.named_parameters()), dict(tuned.named_parameters())
    changed = {n for n in names if not torch.equal(before[n], after[n])}
    assert changed and all("proj" in n for n in changed)  # only the adapted projections moved

"""Every model-running stage puts its model where the runtime says, in the precision asked,
and scores under inference mode; the runtime itself (meta device, shard/gather)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pytest
import torch

from polymnesia.evaluation.config import EvalConfig
from polymnesia.io import write_jsonl_atomic
from polymnesia.models.io import save_model_and_tokenizer
from polymnesia.pipeline.stage import StageContext, StageSpec
from polymnesia.runtime import Runtime, current, using
from polymnesia.stages.drift import DriftConfig, DriftParams, RepresentationDrift
from polymnesia.stages.evaluate_isotropy import EvaluateIsotropy, EvaluateIsotropyParams
from polymnesia.stages.evaluate_lm import EvaluateLM, EvaluateLMParams
from polymnesia.stages.evaluate_translation import EvaluateTranslation, EvaluateTranslationParams
from polymnesia.stages.evaluate_zero_shot import EvaluateZeroShot, EvaluateZeroShotParams
from polymnesia.stages.replay_data import ReplayConfig, ReplayData, ReplayDataParams
from polymnesia.stages.similarity import (
    DatasetSimilarity,
    DatasetSimilarityParams,
    SimilarityConfig,
)

TEXTS = {
    "en": ["In the beginning God created the heaven.", "The Lord is my God.", "God wept."],
    "fr": ["Au commencement Dieu créa le ciel.", "Dieu est mon berger.", "Dieu pleura."],
}
GENRES = ["law", "wisdom", "gospels"]


@dataclass(frozen=True)
class RecordingRuntime(Runtime):
    """A CPU runtime that records each placement and, at every forward, the dtype and mode."""

    log: list[dict[str, Any]] = field(default_factory=list, compare=False)

    def place(self, model: Any, *, stage: str = "") -> Any:
        placed = super().place(model, stage=stage)
        entry: dict[str, Any] = {"stage": stage, "precision": self.precision, "forwards": []}
        self.log.append(entry)

        def hook(module: torch.nn.Module, args: Any, kwargs: Any) -> None:
            p = next(module.parameters())
            entry["forwards"].append((p.device.type, p.dtype, torch.is_inference_mode_enabled()))

        placed.get_input_embeddings().register_forward_pre_hook(hook, with_kwargs=True)
        return placed


@pytest.fixture(scope="module")
def folders(make_tok_model, tmp_path_factory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp("placement")
    tok, model = make_tok_model([t for ts in TEXTS.values() for t in ts])
    save_model_and_tokenizer(model, tok, tmp / "model" / "model")
    for lang, texts in TEXTS.items():
        for split in ("train", "test", "validation"):
            rows = [
                {"id": f"v{i}", "lang": lang, "text": t, "label": None, "meta": {"genre": g}}
                for i, (t, g) in enumerate(zip(texts, GENRES, strict=True))
            ]
            write_jsonl_atomic(tmp / "data" / lang / f"{split}.jsonl", rows)
    recs = [{"instruction": "Repeat.", "input": t, "output": t} for t in TEXTS["en"] * 4]
    write_jsonl_atomic(tmp / "records" / "records.jsonl", recs)
    return tmp


def _run(stage: Any, params: Any, inputs: dict[str, Path], out: Path) -> Any:
    out.mkdir(parents=True, exist_ok=True)
    ctx = StageContext(StageSpec("s", "x", params, {k: k for k in inputs}), out, inputs)
    return stage().run(ctx)


def _stages(folders: Path) -> list[tuple[str, Any, Any, dict[str, Path], str]]:
    model, data = folders / "model", folders / "data"
    langs = {"en": "g", "fr": "g"}
    io = {"model": model, "data": data}
    return [
        (
            "evaluate_lm",
            EvaluateLM,
            EvaluateLMParams(label="M", languages=langs, eval=EvalConfig(precision="bf16")),
            io,
            "bf16",
        ),
        (
            "evaluate_zero_shot",
            EvaluateZeroShot,
            EvaluateZeroShotParams(label="M", languages=langs, precision="bf16"),
            io,
            "bf16",
        ),
        (
            "evaluate_translation",
            EvaluateTranslation,
            EvaluateTranslationParams(
                label="M", languages=langs, shots=1, max_new_tokens=3, precision="fp16"
            ),
            io,
            "fp16",
        ),
        (
            "evaluate_isotropy",
            EvaluateIsotropy,
            EvaluateIsotropyParams(label="M", languages=langs, precision="bf16"),
            io,
            "bf16",
        ),
        (
            "replay_data",
            ReplayData,
            ReplayDataParams(
                replay=ReplayConfig(kind="generative", share=0.2, max_new_tokens=3),
                precision="bf16",
            ),
            {"model": model, "records": folders / "records", "pool": folders / "records"},
            "bf16",
        ),
        (
            "representation_drift",
            RepresentationDrift,
            DriftParams(
                drift=DriftConfig(prompts=3, include_embeddings=True),
                reference_label="A",
                labels=["B"],
                precision="fp16",
            ),
            {"reference": model, "model_0": model, "data": data},
            "fp16",
        ),
        (
            "dataset_similarity",
            DatasetSimilarity,
            DatasetSimilarityParams(
                label="P",
                similarity=SimilarityConfig(embedder="hidden", samples=3),
                precision="bf16",
            ),
            {"model": model, "a": folders / "records", "b": folders / "records"},
            "bf16",
        ),
    ]


def test_every_model_running_stage_places_its_model_on_the_runtime(folders: Path) -> None:
    dtypes = {"no": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    for name, stage, params, inputs, precision in _stages(folders):
        rt = RecordingRuntime(device=torch.device("cpu"))
        with using(rt):
            scores = _run(stage, params, inputs, folders / "out" / name)
        json.dumps([asdict(s) for s in scores])  # the runner writes them as JSON
        assert rt.log, f"{name} never placed a model"
        assert {e["stage"] for e in rt.log} == {name}
        for entry in rt.log:
            assert entry["precision"] == precision, name
            assert entry["forwards"], f"{name}: the placed model never ran"
            assert set(entry["forwards"]) == {("cpu", dtypes[precision], True)}, name


def test_place_on_meta_device_casts_and_moves(make_tok_model) -> None:  # type: ignore[no-untyped-def]
    _, model = make_tok_model(["a b c"])
    rt = Runtime(device=torch.device("meta"), precision="bf16")
    placed = rt.place(model.train(), stage="x")
    assert {(p.device.type, p.dtype) for p in placed.parameters()} == {("meta", torch.bfloat16)}
    assert not placed.training


def test_current_reads_accelerate_state_and_can_be_substituted() -> None:
    rt = current("fp16")
    assert (rt.rank, rt.world, rt.precision, rt.dtype) == (0, 1, "fp16", torch.float16)
    fake = Runtime(device=torch.device("meta"), rank=1, world=3)
    with using(fake):
        got = current("bf16")
        assert (got.device.type, got.rank, got.world, got.precision) == ("meta", 1, 3, "bf16")
        assert current(sharded=False).world == 1
    assert current().device == rt.device


def test_shard_and_gather_keep_input_order() -> None:
    rt = Runtime(device=torch.device("cpu"), rank=1, world=3)
    assert rt.shard(list(range(8))) == [1, 4, 7]
    one = Runtime(device=torch.device("cpu"))
    assert one.gather(one.shard(["a", "b"]), 2) == ["a", "b"]
    assert one.sum([1, 2.5]) == [1.0, 2.5]


def test_precision_accepts_yaml_no() -> None:
    assert EvalConfig.model_validate({"precision": False}).precision == "no"
    with pytest.raises(ValueError, match="'no', 'fp16' or 'bf16'"):
        EvalConfig.model_validate({"precision": "fp8"})


def test_a_slow_inference_precision_on_a_cpu_is_said_once(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import polymnesia.runtime as runtime

    monkeypatch.setattr(runtime, "_NOTED", set())
    monkeypatch.setattr(runtime, "_SLOWDOWN", {torch.bfloat16: 50.0, torch.float16: 2.0})
    rt = runtime.Runtime(device=torch.device("cpu"), precision="bf16")
    rt.place(torch.nn.Linear(2, 2), stage="evaluate")
    rt.place(torch.nn.Linear(2, 2), stage="evaluate")
    with rt.autocast():
        pass
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "[polymnesia] evaluate: bf16 matrix products run 50x slower than float32 on this CPU "
        "(measured now); precision no would be faster here"
    ]
    runtime.Runtime(device=torch.device("cpu"), precision="fp16").place(torch.nn.Linear(2, 2))
    runtime.Runtime(device=torch.device("cpu"), precision="no").place(torch.nn.Linear(2, 2))
    assert capsys.readouterr().err == ""  # 2x is below the note's threshold; float32 needs none
    assert runtime.slow_precision_note(torch.device("meta"), "bf16") is None


def test_the_precision_slowdown_is_measured_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import polymnesia.runtime as runtime

    monkeypatch.setattr(runtime, "_SLOWDOWN", {})
    ratio = runtime.precision_slowdown(torch.bfloat16, n=64)
    assert ratio > 0 and {torch.bfloat16: ratio} == runtime._SLOWDOWN
    assert runtime.precision_slowdown(torch.bfloat16, n=64) == ratio  # not measured again

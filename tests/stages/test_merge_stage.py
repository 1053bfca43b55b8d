"""Stage merge_models: stage folders in, a merged model folder out."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from polymnesia.errors import ConfigError
from polymnesia.merging.maths import average, ties
from polymnesia.pipeline.stage import StageContext, StageSpec
from polymnesia.stages.merge import MergeModels, MergeParams

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "methods"))
from methods_helpers import tiny_model  # noqa: E402


def _stage(tmp_path: Path, name: str, seed: int) -> tuple[Path, dict[str, torch.Tensor]]:
    model = tiny_model(seed=seed)
    model.save_pretrained(tmp_path / name / "model", safe_serialization=True)
    return tmp_path / name, model.state_dict()


def _run(tmp_path: Path, params: MergeParams, inputs: dict[str, Path]) -> Path:
    out = tmp_path / f"out_{params.method}"
    out.mkdir()
    spec = StageSpec("m", "merge_models", params, {r: r for r in inputs})
    MergeModels().run(StageContext(spec, out, inputs))
    return out / "model"


def test_merge_stage_writes_the_merged_model(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM

    (base, s0), (a, s1), (b, s2) = (_stage(tmp_path, n, i) for i, n in enumerate("xab"))
    out = _run(
        tmp_path, MergeParams(method="average", weights=[1, 3]), {"model_0": a, "model_1": b}
    )
    got = AutoModelForCausalLM.from_pretrained(str(out)).state_dict()
    want = average([s1, s2], [1, 3])
    assert all(torch.allclose(got[k], want[k], atol=1e-6) for k in want)
    inputs = {"base": base, "model_0": a, "model_1": b}
    out = _run(tmp_path, MergeParams(method="ties", density=0.5, lam=0.8), inputs)
    got = AutoModelForCausalLM.from_pretrained(str(out)).state_dict()
    want = ties(s0, [s1, s2], density=0.5, lam=0.8)
    assert all(torch.allclose(got[k], want[k], atol=1e-6) for k in want)


def test_merge_stage_refusals(tmp_path: Path) -> None:
    a, _ = _stage(tmp_path, "a", 0)
    with pytest.raises(ValueError, match="weights are for method average"):
        MergeParams(method="ties", weights=[1, 1])
    with pytest.raises(ConfigError, match="model_0, model_1"):
        _run(tmp_path, MergeParams(method="average"), {"model_0": a, "model_2": a})
    with pytest.raises(ConfigError, match="needs a base"):
        _run(tmp_path, MergeParams(method="task_arithmetic"), {"model_0": a, "model_1": a})

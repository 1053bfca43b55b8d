"""Every protocol on architectures other than the Mistral presets (issue 12): tiny random
models of Llama, Qwen2, Gemma, GPT-2 and Mistral, saved as local HF folders by
``polymnesia.testing``, loaded through ``model.name_or_path`` with their tokenizer.

The language-modelling protocol runs on every architecture; each other protocol runs on one
architecture other than Mistral (the whole matrix would take too long for CI), chosen so that
every architecture family is exercised by a training-method protocol: LF-MLF's per-language
gradients on GPT-2 (fused attention projections), the lifelong LoRA arms on Qwen2, paper 000's
embedding resets and vocabulary expansion on Llama, paper 002's layer freezing on Gemma.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from smoke import SMOKE

from polymnesia.cli.main import main
from polymnesia.results import read_scores
from polymnesia.testing import corpus, save_tiny, tiny_bpe

pytestmark = pytest.mark.integration
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
DECODERS = ("llama", "qwen2", "gemma", "gpt2", "mistral")
SIZE = {
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
}


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("architectures")
    tok = tiny_bpe(corpus(("en", "es", "fr", "de", "ru", "ar", "zh")), 600)
    return {arch: save_tiny(root / arch, arch, tok, **SIZE) for arch in DECODERS}


def _finite_scores(run: Path) -> list:  # type: ignore[type-arg]
    scores = read_scores(run / "results" / "scores.jsonl")
    assert scores and all(s.value == s.value for s in scores)  # no NaN
    return scores


@pytest.mark.parametrize("arch", DECODERS)
def test_language_modeling_on_each_architecture(
    arch: str, folders, isolated_cache, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    d = str(folders[arch])
    run = tmp_path / "run"
    args = [*SMOKE, f"model.name_or_path={d}", f"tokenizer.name_or_path={d}"]
    assert main(["run", str(CONFIGS / "quickstart.yaml"), *args, "--run-dir", str(run)]) == 0
    bpb = [s for s in _finite_scores(run) if s.metric == "bits_per_byte"]
    assert len(bpb) == 8


@pytest.mark.parametrize(
    ("config", "arch", "keys", "extra"),
    [
        ("lf_mlf_smoke", "gpt2", "pretrain", ["seeds=[0]", "methods=[uniform,lf_mlf]"]),
        (
            "lifelong_smoke",
            "qwen2",
            "base",
            ["methods=[vanilla,shared_lora]", "orders=[{name: res, kind: resource}]"],
        ),
        ("active_forgetting_smoke", "llama", "", []),
        (
            "two_phase_smoke",
            "gemma",
            "base",
            ["mixture=false", "mitigation.replay=[]", "mitigation.lora_rank=null"],
        ),
    ],
)
def test_protocol_on_another_architecture(
    config, arch, keys, extra, folders, isolated_cache, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    d = str(folders[arch])
    prefix = f"{keys}." if keys else ""
    run = tmp_path / "run"
    args = [f"{prefix}model.name_or_path={d}", f"{prefix}tokenizer.name_or_path={d}", *extra]
    assert main(["run", str(CONFIGS / f"{config}.yaml"), *args, "--run-dir", str(run)]) == 0
    _finite_scores(run)
    assert (run / "report.md").is_file()

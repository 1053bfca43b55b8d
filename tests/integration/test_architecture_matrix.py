"""Every protocol on architectures other than the Mistral presets (issue 12): tiny random
models of Llama, Qwen2, Gemma, GPT-2 and Mistral, saved as local HF folders by
``polymnesia.testing``, loaded through ``model.name_or_path`` with their tokenizer.

The whole matrix: every protocol on every decoder architecture, each protocol cut to one arm
of each kind of work (LF-MLF's per-language gradients, the lifelong full and LoRA arms, paper
000's embedding resets and vocabulary expansion, the two-phase CFT paper's two phases, similarity,
drift and
layer freezing), and the two classification protocols on an XLM-R encoder with a SentencePiece
Unigram tokenizer, as Mao et al. 2022 and Khelli et al. 2025 used.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from smoke import SMOKE

from polymnesia.cli.main import main
from polymnesia.io import read_jsonl
from polymnesia.results import read_scores
from polymnesia.testing import corpus, save_tiny, tiny_bpe, tiny_sentencepiece, tiny_tiktoken_bpe

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


#: each protocol's smoke config, where its model and tokenizer keys live, and overrides that
#: keep one arm of each kind of work (so the whole matrix stays at minutes)
PROTOCOLS: dict[str, tuple[str, list[str]]] = {
    "lf_mlf_smoke": ("pretrain", ["seeds=[0]", "methods=[uniform,lf_mlf]", "slf=false"]),
    "lifelong_smoke": (
        "base",
        ["methods=[vanilla,shared_lora]", "orders=[{name: res, kind: resource}]"],
    ),
    "active_forgetting_smoke": ("", []),
    "two_phase_smoke": (
        "base",
        ["mixture=false", "mitigation.replay=[]", "mitigation.lora_rank=null"],
    ),
}
#: what one architecture needs on top: a head tied to the embeddings (GPT-2, Gemma) cannot be
#: replaced at vocabulary adaptation (``reinit`` refuses it in one line), and GPT-2's fused
#: attention has no separate q/k/v projections for LF_H2's pattern
ARCH_EXTRA: dict[tuple[str, str], list[str]] = {
    ("active_forgetting_smoke", "gpt2"): ["adapt.head=keep"],
    ("active_forgetting_smoke", "gemma"): ["adapt.head=keep"],
    ("two_phase_smoke", "gpt2"): [
        "mitigation.freezing=[{name: LF_H2, strategy: most_changed, top_k: 1, "
        "pattern: 'attn\\.c_attn'}, {name: Spectrum, strategy: spectrum, pct: 50}]"
    ],
}
#: the classification protocols (Mao et al. 2022 and Khelli et al. 2025 used XLM-R) also run on an
#: encoder
CLASSIFICATION = ("lf_mlf_smoke", "lifelong_smoke")


@pytest.fixture(scope="module")
def encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tok, _ = tiny_sentencepiece(corpus(("en", "es", "fr", "de", "ru")), 600, "unigram")
    return save_tiny(tmp_path_factory.mktemp("encoder") / "xlm-roberta", "xlm-roberta", tok, **SIZE)


@pytest.mark.parametrize("arch", [a for a in DECODERS if a != "mistral"])
@pytest.mark.parametrize("config", list(PROTOCOLS))
def test_protocol_on_each_architecture(config, arch, folders, isolated_cache, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Every protocol on every decoder architecture (Mistral is the presets' own: every other
    test runs it)."""
    keys, extra = PROTOCOLS[config]
    d = str(folders[arch])
    prefix = f"{keys}." if keys else ""
    run = tmp_path / "run"
    args = [f"{prefix}model.name_or_path={d}", f"{prefix}tokenizer.name_or_path={d}", *extra]
    args += ARCH_EXTRA.get((config, arch), [])
    assert main(["run", str(CONFIGS / f"{config}.yaml"), *args, "--run-dir", str(run)]) == 0
    _finite_scores(run)
    assert (run / "report.md").is_file()


def test_a_tied_head_cannot_be_replaced_at_adaptation(
    folders, isolated_cache, tmp_path, capsys
) -> None:  # type: ignore[no-untyped-def]
    """The one-line refusal the ARCH_EXTRA override avoids: GPT-2 ties its head."""
    d = str(folders["gpt2"])
    args = [f"model.name_or_path={d}", f"tokenizer.name_or_path={d}"]
    config = str(CONFIGS / "active_forgetting_smoke.yaml")
    assert main(["run", config, *args, "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "head: reinit replaces the LM head" in err and "use head: keep" in err


def test_lf_mlf_on_an_encoder(encoder, isolated_cache, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Mao et al. 2022's setting: XLM-R imported and fine-tuned as it is (no pretraining stage), its
    F_p a masked-LM loss."""
    run = tmp_path / "run"
    keys, extra = PROTOCOLS["lf_mlf_smoke"]
    args = [f"{keys}.model.name_or_path={encoder}", *extra]
    assert main(["run", str(CONFIGS / "lf_mlf_smoke.yaml"), *args, "--run-dir", str(run)]) == 0
    scores = _finite_scores(run)
    assert {s.metric for s in scores} >= {"accuracy", "mlm_loss"}
    assert "lm_loss" not in {s.metric for s in scores}
    assert (run / "report.md").is_file()


def test_lifelong_on_an_encoder(encoder, isolated_cache, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Khelli et al. 2025's setting: XLM-R imported as it is (``base.pretrain: false``), then the
    sequential steps put a sequence classifier on its body."""
    run = tmp_path / "run"
    keys, extra = PROTOCOLS["lifelong_smoke"]
    args = ["base.pretrain=false", f"{keys}.model.name_or_path={encoder}", *extra]
    assert main(["run", str(CONFIGS / "lifelong_smoke.yaml"), *args, "--run-dir", str(run)]) == 0
    _finite_scores(run)
    plan = (run / "run.json").read_text()
    assert "import_model" in plan and "train_tokenizer" not in plan
    assert (run / "report.md").is_file()


def test_two_phase_in_a_models_own_chat_template(isolated_cache, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A Llama with the Llama-3 chat template, used as it is (``base.pretrain: false``, as an
    off-the-shelf instruct model): instruction-tuned in its template and evaluated in it, the
    offline harness tasks included (their prompts, answer tails and stop marker)."""
    tok = tiny_tiktoken_bpe(corpus(("en", "fr", "de")), 600)
    d = str(save_tiny(tmp_path / "llama3", "llama", tok, **SIZE))
    keys, extra = PROTOCOLS["two_phase_smoke"]
    run = tmp_path / "run"
    args = [f"{keys}.model.name_or_path={d}", f"{keys}.tokenizer.name_or_path={d}", *extra]
    args += [
        f"{keys}.pretrain=false",
        "evaluate.harness.english=[poly_genre_en,poly_continue_gen_en]",
    ]
    assert main(["run", str(CONFIGS / "two_phase_smoke.yaml"), *args, "--run-dir", str(run)]) == 0
    scores = _finite_scores(run)
    assert {s.task for s in scores} >= {
        "poly_genre_en",
        "poly_continue_gen_en",
        "poly_continue_mc_fr",
    }
    evals = sorted((run / "stages").glob("eval_*/task_data"))
    assert evals
    for data in evals:
        for doc in read_jsonl(data / "poly_genre_en.test.jsonl"):
            # the template's BOS is left to lm-eval, which puts it once at a context's head
            assert doc["prompt"].startswith("<|start_header_id|>system")
            assert "<|begin_of_text|>" not in doc["prompt"]
            assert all(c.endswith("<|eot_id|>") for c in doc["choices"])
        samples = data.parent / "lm_eval" / "samples_poly_continue_gen_en.jsonl"
        for s in read_jsonl(samples):
            assert "<|eot_id|>" in s["arguments"][0][1]["until"]

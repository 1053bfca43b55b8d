"""Every ``configs/gpu/`` config run end to end on the CPU, shrunk to seconds.

The GPU configs are sized for one 80 GB GPU and cannot run here, but everything
except their scale can: their sections, bf16 training and inference, TensorBoard
tracking, every stage and the report. The overrides below shrink the data, the
model (``nano``; ``tiny`` where freezing needs two layers), steps and
evaluation sizes, and nothing else, so a broken section of a GPU config fails
here, in CI, not in a GPU session's limited time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.cli.main import main
from polymnesia.io import read_jsonl

pytestmark = pytest.mark.integration
GPU = Path(__file__).resolve().parents[2] / "configs" / "gpu"

DATA = ["data.max_train_per_lang=60", "data.max_eval_per_lang=12"]


def _base(prefix: str, preset: str = "nano") -> list[str]:
    """A small tokenizer and model trained 4 steps, under a config's base-model keys."""
    tok = f"{prefix}tokenizer" if prefix else "tokenizer"
    model = f"{prefix}model" if prefix else "model"
    train = f"{prefix}train" if prefix else "train"
    return [
        f"{tok}.vocab_size=600",
        f"{tok}.sample_texts=400",
        f"{model}.preset={preset}",
        f"{train}.steps=4",
        f"{train}.batch_size=4",
        f"{train}.block_size=32",
        f"{train}.log_every=2",
        f"{train}.checkpoint_every=2",
    ]


def _steps(section: str, steps: int = 2) -> list[str]:
    return [
        f"{section}.steps={steps}",
        f"{section}.batch_size=4",
        f"{section}.log_every=1",
        f"{section}.checkpoint_every=2",
    ]


SHRINK: dict[str, list[str]] = {
    "new_token_init": [
        *DATA,
        "tokenizer.vocab_size=600",
        "tokenizer.sample_texts=400",
        "model.preset=nano",
        *_steps("pretrain", 4),
        "pretrain.block_size=32",
        "bases=[{name: standard}, {name: af, forgetting: {reset_every: 2, std: 0.02}}]",
        "relearn.vocabulary.new_vocab_size=300",
        "relearn.vocabulary.sample_texts=200",
        *_steps("relearn.train"),
        "relearn.train.block_size=32",
        "relearn.eval_at=[1]",
        "evaluate.max_texts_per_lang=6",
        "evaluate.batch_size=8",
        "evaluate.max_length=32",
        "bootstrap.n_resamples=50",
    ],
    "language_modeling": [
        *DATA,
        *_base(""),
        "train.eval_every=2",
        "evaluate.max_texts_per_lang=6",
        "evaluate.batch_size=8",
    ],
    "active_forgetting": [
        *DATA,
        "tokenizer.vocab_size=600",
        "tokenizer.sample_texts=400",
        "model.preset=nano",
        *_steps("pretrain", 4),
        "pretrain.block_size=32",
        "forgetting.reset_every=2",
        "adapt.new_vocab_size=400",
        "adapt.sample_texts=200",
        *_steps("adapt.train"),
        "adapt.train.block_size=32",
        "instruct.max_records=24",
        *_steps("instruct.train"),
        "evaluate.max_texts_per_lang=6",
        "evaluate.batch_size=8",
        "downstream.isotropy_texts=6",
        "downstream.translation_texts=2",
        "downstream.translation_shots=1",
        "downstream.max_new_tokens=4",
        "downstream.zero_shot_texts=4",
    ],
    "lf_mlf": [
        *DATA,
        *_base("pretrain."),
        "seeds=[0,1]",
        *_steps("finetune", 3),
        "evaluate.max_train_per_lang=30",
        "evaluate.max_texts_per_lang=8",
        "evaluate.batch_size=8",
        "evaluate.forgetting_texts=4",
        "evaluate.forgetting_max_length=32",
    ],
    "lifelong": [
        *DATA,
        *_base("base."),
        "languages=[en,fr,de,sw]",
        "hops=2",
        "train_per_lang=16",
        "evaluate.max_texts_per_lang=8",
        "evaluate.batch_size=8",
        "train.full.batch_size=8",
        "train.full.early_stopping={max_epochs: 2, patience: 1}",
        "train.lora.batch_size=8",
        "train.lora.early_stopping={max_epochs: 2, patience: 1}",
    ],
    "two_phase": [
        "data.max_train_per_lang=60",
        "data.max_eval_per_lang=20",
        *_base("base.", "tiny"),
        "sets.english.records=24",
        "sets.similar.records=24",
        "sets.dissimilar.records=24",
        *_steps("phase1"),
        *_steps("phase2"),
        "max_length=320",
        "mitigation.replay=[{name: GR_5, kind: generative, share: 0.05, max_new_tokens: 4, "
        "batch_size: 8}, {name: ER_10, kind: english, share: 0.1}]",
        "evaluate.harness.limit=4",
        "evaluate.harness.docs_per_task=4",
        "evaluate.harness.batch_size=8",
        "evaluate.harness.max_gen_toks=4",
        "similarity.samples=10",
        "drift.prompts=4",
    ],
}


def test_every_gpu_config_has_a_rehearsal() -> None:
    assert sorted(SHRINK) == sorted(p.stem for p in GPU.glob("*.yaml"))


@pytest.mark.parametrize("name", sorted(SHRINK))
def test_gpu_config_runs_shrunk_on_the_cpu(name: str, isolated_cache: Path, tmp_path: Path) -> None:
    run = tmp_path / name
    assert main(["run", str(GPU / f"{name}.yaml"), *SHRINK[name], "--run-dir", str(run)]) == 0
    report = (run / "report.md").read_text(encoding="utf-8")
    assert "## Compute by stage" in report
    assert read_jsonl(run / "results" / "scores.jsonl")
    trained = list(isolated_cache.glob("stages/*/*/*/events.out.tfevents.*"))
    uses_tensorboard = "tensorboard" in (GPU / f"{name}.yaml").read_text(encoding="utf-8")
    assert bool(trained) == uses_tensorboard  # the configs' tracker logged

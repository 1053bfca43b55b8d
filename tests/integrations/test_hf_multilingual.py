"""Per-language gradient combination as a Trainer subclass: ``MultilingualTrainer`` reading a
language column ends where polymnesia's loop with the same combiner ends, on the loop's own
batches (each Trainer batch is one batch of the loop's ``MultilingualData``: B examples of
each language, in the loop's order)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import datasets
import pytest
import torch
from hf_helpers import (
    BATCH,
    STEPS,
    TOL,
    largest_difference,
    random_data,
    tiny_model,
    train_cfg,
    trainer_args,
    weights,
)

from polymnesia.errors import ConfigError
from polymnesia.gradients import get_combiner
from polymnesia.integrations import MultilingualTrainer
from polymnesia.integrations.multilingual import COMBINER_FILE
from polymnesia.training.data import IndexStream
from polymnesia.training.loop import train
from polymnesia.training.multilingual_step import LANG_KEY, MultilingualData, MultilingualStep

LANGS = ["en", "de", "fr"]
COMBINERS: dict[str, dict[str, Any]] = {
    "uniform": {},
    "pcgrad": {},
    "gradvac": {},
    "mgda": {},
    "lf_mlf": {"on_infeasible": "uniform"},
    "lf_mlf_update": {"on_infeasible": "uniform", "accumulate": "update"},
}


def _data() -> MultilingualData:
    return MultilingualData([random_data(n=16, seed=s) for s in range(len(LANGS))], LANGS)


def _rows(data: MultilingualData, accum: int = 1) -> list[dict[str, torch.Tensor]]:
    """The loop's micro-batches, one row per example (the Trainer's collator stacks them
    back)."""
    stream, rows = IndexStream(len(data), 0), []
    for _ in range(STEPS):
        indices = stream.next(BATCH)
        per = BATCH // accum
        for m in range(accum):
            batch = data.collate(indices[m * per : (m + 1) * per])
            n = batch["input_ids"].shape[0]
            rows += [{k: v[i] for k, v in batch.items()} for i in range(n)]
    return rows


def _combiner(case: str) -> tuple[str, dict[str, Any]]:
    return case.removesuffix("_update"), COMBINERS[case]


@pytest.mark.parametrize("case", list(COMBINERS))
def test_multilingual_trainer_equals_the_loop(tmp_path: Path, case: str) -> None:
    name, options = _combiner(case)
    data = _data()
    step = MultilingualStep(get_combiner(name, **options), LANGS)
    cfg = train_cfg(STEPS, chunked_loss=False, weight_decay=0.1)
    loop, _ = train(tiny_model(), data, cfg, tmp_path / "l", seed=0, step_fn=step, plugins=[step])
    trainer = MultilingualTrainer(
        model=tiny_model(),
        args=trainer_args(tmp_path / "hf", per_device_train_batch_size=BATCH * len(LANGS)),
        train_dataset=_rows(data),
        languages=LANGS,
        combiner=name,
        combiner_options=options,
        language_column=LANG_KEY,
    )
    trainer.train()
    assert trainer.state.global_step == STEPS
    assert largest_difference(weights(loop), weights(trainer.model)) <= TOL
    if name != "uniform":
        assert trainer.last_weights == pytest.approx(step.last_weights, abs=1e-6)


def test_multilingual_trainer_accumulates_each_languages_gradient(tmp_path: Path) -> None:
    """Two micro-batches per step: each language's row sums both before PCGrad combines."""
    data = _data()
    step = MultilingualStep(get_combiner("pcgrad"), LANGS)
    cfg = train_cfg(STEPS, chunked_loss=False, weight_decay=0.1, grad_accum=2)
    loop, _ = train(tiny_model(), data, cfg, tmp_path / "l", seed=0, step_fn=step, plugins=[step])
    trainer = MultilingualTrainer(
        model=tiny_model(),
        args=trainer_args(
            tmp_path / "hf",
            per_device_train_batch_size=BATCH // 2 * len(LANGS),
            gradient_accumulation_steps=2,
        ),
        train_dataset=_rows(data, accum=2),
        languages=LANGS,
        combiner="pcgrad",
        language_column=LANG_KEY,
    )
    trainer.train()
    assert largest_difference(weights(loop), weights(trainer.model)) <= TOL


def test_bad_language_columns_are_refused_in_one_line(tmp_path: Path) -> None:
    rows = _rows(_data())
    for bad, message in (
        ([{k: v for k, v in r.items() if k != LANG_KEY} for r in rows], "needs a column"),
        ([{**r, LANG_KEY: torch.tensor(5)} for r in rows], "language index 5"),
    ):
        trainer = MultilingualTrainer(
            model=tiny_model(),
            args=trainer_args(tmp_path, per_device_train_batch_size=BATCH * len(LANGS)),
            train_dataset=bad,
            languages=LANGS,
            language_column=LANG_KEY,
        )
        with pytest.raises(ConfigError, match=message) as e:
            trainer.train()
        assert "\n" not in str(e.value)
    with pytest.raises(ConfigError, match="has no option 'beta'"):
        MultilingualTrainer(
            model=tiny_model(),
            args=trainer_args(tmp_path),
            languages=LANGS,
            combiner="pcgrad",
            combiner_options={"beta": 1},
        )
    with pytest.raises(ConfigError, match="languages must name"):
        MultilingualTrainer(model=tiny_model(), args=trainer_args(tmp_path), languages=[])


def test_the_language_column_survives_remove_unused_columns(tmp_path: Path) -> None:
    """A ``datasets.Dataset`` loses the columns the model's forward does not take (the
    Trainer's default), but not the language column."""
    rows = _rows(_data())
    table = datasets.Dataset.from_list([{k: v.tolist() for k, v in r.items()} for r in rows])
    trainer = MultilingualTrainer(
        model=tiny_model(),
        args=trainer_args(tmp_path, per_device_train_batch_size=BATCH * len(LANGS), max_steps=2),
        train_dataset=table,
        languages=LANGS,
        combiner="pcgrad",
        language_column=LANG_KEY,
    )
    assert trainer.args.remove_unused_columns
    trainer.train()
    assert trainer.state.global_step == 2 and trainer.last_weights is not None


def _maker(case: str, data: MultilingualData):
    name, options = _combiner(case)

    def make(out: Path, callbacks: list[Any], **kw: Any) -> MultilingualTrainer:
        return MultilingualTrainer(
            model=tiny_model(),
            args=trainer_args(out, per_device_train_batch_size=BATCH * len(LANGS), **kw),
            train_dataset=_rows(data),
            languages=LANGS,
            combiner=name,
            combiner_options=options,
            language_column=LANG_KEY,
            callbacks=callbacks,
        )

    return make


@pytest.mark.parametrize("case", ["pcgrad", "gradvac", "lf_mlf", "lf_mlf_update"])
def test_multilingual_trainer_resumes_the_combiners_state(resume, case: str) -> None:
    """Interrupted after its step-3 checkpoint and resumed: GradVac's EMA targets, the
    random orders' generator, LF-MLF's accumulated vector come back from combiner.pt, so the
    weights are the uninterrupted run's, bit for bit."""
    whole, resumed = resume(_maker(case, _data()), list)
    assert resumed.state.global_step == STEPS
    assert largest_difference(weights(whole.model), weights(resumed.model)) == 0.0
    assert resumed.last_weights == whole.last_weights
    assert str(whole.combiner.state_dict()) == str(resumed.combiner.state_dict())


def test_a_checkpoint_without_the_combiners_state_is_refused_in_one_line(tmp_path: Path) -> None:
    make = _maker("gradvac", _data())
    save = {"save_strategy": "steps", "save_steps": 2, "max_steps": 2}
    make(tmp_path, [], **save).train()
    (tmp_path / "checkpoint-2" / COMBINER_FILE).unlink()
    with pytest.raises(ConfigError, match=f"has no {COMBINER_FILE}") as e:
        make(tmp_path, [], **{**save, "max_steps": 3}).train(
            resume_from_checkpoint=str(tmp_path / "checkpoint-2")
        )
    assert "\n" not in str(e.value)

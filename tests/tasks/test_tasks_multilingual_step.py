"""The per-language step function: uniform equals the mean-loss gradient, accumulation,
head gradients, the LF-MLF stop and bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tasks_helpers import record  # type: ignore[import-not-found]

from polymnesia.errors import DataError, PolymnesiaError
from polymnesia.gradients import InfeasibleQP, get_combiner
from polymnesia.gradients.uniform import Uniform  # type: ignore[attr-defined]
from polymnesia.tasks.classification import (
    ClassificationData,
    build_sequence_examples,
    load_classifier,
)
from polymnesia.training.config import TrainConfig
from polymnesia.training.loop import train
from polymnesia.training.multilingual_step import MultilingualData, MultilingualStep, split_params
from polymnesia.training.plugins import LoopState

TEXTS = {
    "en": ["the earth", "and the deep", "God created", "the heavens and the earth"],
    "de": ["die Erde", "und die Tiefe", "Gott schuf", "den Himmel und die Erde"],
}


def _data(tok):  # type: ignore[no-untyped-def]
    sets = []
    for lang, texts in TEXTS.items():
        recs = [record(i, lang, t, i % 3) for i, t in enumerate(texts)]
        sets.append(ClassificationData(build_sequence_examples(recs, tok, 16), tok.pad_token_id))
    return sets


def _state(model):  # type: ignore[no-untyped-def]
    from accelerate import Accelerator

    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    return LoopState(model=model, optimizer=opt, accelerator=Accelerator(cpu=True), total_steps=1)


def test_uniform_step_is_the_mean_loss_gradient(lm_folder) -> None:  # type: ignore[no-untyped-def]
    model, tok = load_classifier(lm_folder, num_labels=3)
    sets = _data(tok)
    data = MultilingualData(sets, ["en", "de"], seed=0)
    batch = data.collate([0, 1, 2, 3])
    assert batch["lang_index"].tolist() == [0] * 4 + [1] * 4
    padding = batch["input_ids"][batch["attention_mask"] == 0]
    assert padding.numel() > 0 and bool((padding == tok.pad_token_id).all())  # never id 0
    step = MultilingualStep(get_combiner("uniform"), ["en", "de"])
    loss = step(_state(model), [batch])
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ref = 0.0
    for t in range(2):
        sel = batch["lang_index"] == t
        ref = ref + model(**{k: v[sel] for k, v in batch.items() if k != "lang_index"}).loss / 2
    ref.backward()  # type: ignore[union-attr]
    for g, p in zip(got, model.parameters(), strict=True):
        assert torch.allclose(g, p.grad, atol=1e-6)
    assert float(loss.detach()) == pytest.approx(float(ref.detach()), rel=1e-5)
    assert step.last_weights == [0.5, 0.5]


def test_accumulation_matches_one_micro_batch(lm_folder) -> None:  # type: ignore[no-untyped-def]
    model, tok = load_classifier(lm_folder, num_labels=3)
    data = MultilingualData(_data(tok), ["en", "de"], seed=0)
    step = MultilingualStep(get_combiner("pcgrad"), ["en", "de"])
    step(_state(model), [data.collate([0, 1, 2, 3])])
    one = [p.grad.clone() for p in model.parameters()]
    step = MultilingualStep(get_combiner("pcgrad"), ["en", "de"])
    step(_state(model), [data.collate([0, 1]), data.collate([2, 3])])
    for g, p in zip(one, model.parameters(), strict=True):
        assert torch.allclose(g, p.grad, atol=1e-6)


def test_head_keeps_the_mean_gradient_and_body_gets_the_combined_one(lm_folder) -> None:  # type: ignore[no-untyped-def]
    model, tok = load_classifier(lm_folder, num_labels=3)
    shared, head = split_params(model)
    assert len(head) == 1 and head[0] is model.score.weight
    data = MultilingualData(_data(tok), ["en", "de"], seed=0)
    step = MultilingualStep(get_combiner("lf_mlf"), ["en", "de"])
    step(_state(model), [data.collate([0, 1, 2, 3])])
    w = step.last_weights
    assert w is not None and sum(w) == pytest.approx(1.0) and min(w) >= 0
    assert step.state_dict()["combiner"]["steps"] == 1


class _Infeasible(Uniform):  # type: ignore[misc]
    """A combiner whose second call finds Problem 2 empty (as LF-MLF with on_infeasible='stop')."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def _combine(self, grads: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == 2:
            raise InfeasibleQP("LF-MLF step 2: the feasible set of Problem 2 is empty")
        return super()._combine(grads)


def test_infeasible_qp_stops_training_cleanly(lm_folder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model, tok = load_classifier(lm_folder, num_labels=3)
    data = MultilingualData(_data(tok), ["en", "de"], seed=0)
    step = MultilingualStep(_Infeasible(), ["en", "de"])
    cfg = TrainConfig(steps=5, batch_size=2, lr=1e-3, progress_bar=False, checkpoint_every=100)
    _, res = train(model, data, cfg, tmp_path, step_fn=step, plugins=[step])
    assert res.steps == 1
    assert step.stop_info["stop_step"] == 2 and "empty" in step.stop_info["stop_reason"]


def test_nan_gradient_names_the_language(lm_folder) -> None:  # type: ignore[no-untyped-def]
    model, tok = load_classifier(lm_folder, num_labels=3)
    data = MultilingualData(_data(tok), ["en", "de"], seed=0)
    with torch.no_grad():
        model.score.weight.fill_(float("nan"))
    step = MultilingualStep(get_combiner("uniform"), ["en", "de"])
    # the head is NaN, so every body gradient is NaN: the first row, 'en', is named
    with pytest.raises(PolymnesiaError, match="language 'en'"):
        step(_state(model), [data.collate([0, 1])])


def test_bad_input(lm_folder) -> None:  # type: ignore[no-untyped-def]
    _, tok = load_classifier(lm_folder, num_labels=3)
    sets = _data(tok)
    with pytest.raises(DataError, match="one dataset per language"):
        MultilingualData(sets, ["en"], seed=0)
    with pytest.raises(PolymnesiaError, match="at least one"):
        MultilingualStep(get_combiner("uniform"), [])

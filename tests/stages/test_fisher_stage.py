"""The ``fisher`` stage (EWC's Fisher on instruction data): golden values, bad input."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from polymnesia.errors import ConfigError, DataError
from polymnesia.methods.regularization import EWC
from polymnesia.pipeline.stage import StageContext, StageSpec
from polymnesia.runtime import current
from polymnesia.stages.fisher import Fisher, FisherParams, estimate_fisher, sampled
from polymnesia.training.data import PaddedExamples


class Unigram(torch.nn.Module):
    """A language model of two tokens whose next-token logits are one parameter vector: the
    mean cross-entropy over the response positions (labels != -100), as a decoder's loss."""

    def __init__(self) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(torch.zeros(2))

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor, **_: Any) -> Any:
        targets = labels[labels != -100]
        return SimpleNamespace(loss=-F.log_softmax(self.logits, -1)[targets].mean())


# a prompt token (5, never scored) then the response: example A answers "0", B "0 1"
EXAMPLES = PaddedExamples(
    [
        {"input_ids": [5, 0], "labels": [-100, 0]},
        {"input_ids": [5, 0, 1], "labels": [-100, 0, 1]},
    ],
    pad_id=0,
)


def _fisher(examples: int, batch_size: int, seed: int = 0) -> list[float]:
    f, _ = estimate_fisher(
        Unigram(),
        EXAMPLES,
        examples=examples,
        batch_size=batch_size,
        seed=seed,
        rt=current("no", sharded=False),
    )
    return [round(x, 6) for x in f["logits"].tolist()]


def test_fisher_of_instruction_examples_is_the_hand_value() -> None:
    # at logits 0, d CE / d logits = softmax - onehot = (0.5, 0.5) - onehot(target):
    # A (target 0): (-0.5, 0.5) -> squared (0.25, 0.25); B (targets 0, 1): mean (0, 0)
    assert _fisher(2, 1) == [0.125, 0.125]  # per-example: ((0.25, 0.25) + (0, 0)) / 2
    # one batch of both: the mean over its three response tokens (0, 0, 1), padding unscored:
    # (0.5 - 2/3, 0.5 - 1/3) = (-1/6, 1/6), squared 1/36
    assert _fisher(2, 2) == [round(1 / 36, 6)] * 2
    # more examples asked for than there are: all of them
    assert _fisher(99, 1) == [0.125, 0.125]


def test_a_sample_of_one_example_is_that_example_s_fisher() -> None:
    by_seed = {s: sampled(2, 1, s) for s in range(8)}
    assert {tuple(v) for v in by_seed.values()} == {(0,), (1,)}  # the seed picks which
    for seed, (i,) in by_seed.items():
        assert _fisher(1, 1, seed) == ([0.25, 0.25] if i == 0 else [0.0, 0.0])
    assert sampled(5, 3, 1) == sampled(5, 3, 1) == sorted(sampled(5, 3, 1))


def test_a_fisher_stage_without_records_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "set").mkdir()
    (tmp_path / "set" / "records.jsonl").write_text("")
    spec = StageSpec("fisher_X", "fisher", FisherParams(records=["records_0"]))
    ctx = StageContext(
        spec, tmp_path / "out", {"model": tmp_path / "no_model", "records_0": tmp_path / "set"}
    )
    with pytest.raises(DataError) as e:
        Fisher().run(ctx)
    assert "no instruction records" in str(e.value) and "\n" not in str(e.value)


def test_ewc_refuses_a_fisher_naming_none_of_the_model_s_parameters() -> None:
    ewc = EWC(lam=1.0, fisher={"other.weight": torch.ones(2)})
    with pytest.raises(ConfigError) as e:
        ewc.param_groups(Unigram(), [])
    assert "none a trainable parameter of this model" in str(e.value)
    assert "\n" not in str(e.value)

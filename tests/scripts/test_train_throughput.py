"""benchmarks/train_throughput.py counts the tokens each side trained on."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))  # the script imports its sibling _common
spec = importlib.util.spec_from_file_location(
    "train_throughput", ROOT / "benchmarks" / "train_throughput.py"
)
tt = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
spec.loader.exec_module(tt)  # type: ignore[union-attr]


def args(**kw: object) -> argparse.Namespace:
    base = dict(
        steps=4, batch=2, skip=1, precision="no", fused="null", chunked_loss="true", preset="tiny"
    )
    return argparse.Namespace(**{**base, **kw})


def test_tokens_count_training_inputs_only() -> None:
    from _common import tiny_model

    model = tiny_model(50)
    tokens = tt.Tokens(model)
    ids = torch.randint(0, 50, (2, 8))
    model.train()
    model(input_ids=ids)
    tokens.stamp()
    model.eval()
    with torch.no_grad():
        model(input_ids=ids)  # scoring is not training
    assert tokens.seen == 16


def counter() -> tt.Tokens:
    from _common import tiny_model

    return tt.Tokens(tiny_model(50))


def test_steady_is_the_median_step_rate() -> None:
    tokens = counter()
    # the ends of steps 1-5 (time, tokens so far): steps 2-5 ran at 100, 200, 50, 300 tokens/s
    tokens.stamps = [(0.0, 0), (1.0, 100), (2.0, 300), (4.0, 400), (5.0, 700)]
    assert tokens.steady(args(skip=1)) == pytest.approx(150.0)
    assert tokens.steady(args(skip=2)) == pytest.approx(200.0)  # steps 3-5


@pytest.mark.parametrize("side", ["loop", "trainer"])
def test_each_side_trains_on_full_batches_of_a_short_data_set(
    side: str, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = torch.randint(0, 60, (5, 16))  # 2 full batches of 2 and 1 block left over
    a = args()
    if side == "loop":
        total, _ = tt.run_polymnesia(blocks, 60, a)
    else:
        total, _, _ = tt.run_trainer(blocks, 60, a)
    assert total > 0
    assert "note:" not in capsys.readouterr().out  # 4 steps x 2 blocks x 16 tokens


def test_check_names_a_side_that_trained_on_fewer_tokens(
    capsys: pytest.CaptureFixture[str],
) -> None:
    tokens = counter()
    tokens.seen = 7 * 16
    tokens.check("transformers Trainer", args(), 16)
    assert "trained on 112 tokens, not 4 x 2 x 16 = 128" in capsys.readouterr().out

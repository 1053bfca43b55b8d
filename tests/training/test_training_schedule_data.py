import math

import pytest
import torch

from polymnesia.training.data import IndexStream, PaddedExamples, pack_documents
from polymnesia.training.schedule import warmup_cosine, windowed


def test_warmup_then_cosine_hand_values():
    f = lambda s: warmup_cosine(s, warmup=4, total=12)  # noqa: E731
    assert [f(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert f(4) == pytest.approx(1.0)
    assert f(8) == pytest.approx(0.5)  # half way through the 8 decay steps
    assert f(12) == pytest.approx(0.0, abs=1e-12)
    assert warmup_cosine(8, warmup=4, total=12, min_ratio=0.1) == pytest.approx(0.1 + 0.9 * 0.5)


def test_windowed_schedule_restarts_each_window():
    vals = [windowed(s, window=5, warmup=1, total=100) for s in range(10)]
    assert vals[:5] == vals[5:]
    assert vals[0] == 1.0 and vals[4] < vals[1]


def test_index_stream_covers_each_epoch_and_resumes():
    s = IndexStream(7, seed=3)
    first = s.next(5)
    state = s.state_dict()
    rest = s.next(9)
    assert sorted(first + rest[:2]) == list(range(7))  # epoch 0 is a permutation
    s2 = IndexStream(7, seed=3)
    s2.load_state_dict(state)
    assert s2.next(9) == rest


def test_pack_documents_appends_eos_and_cuts_blocks():
    blocks = pack_documents([[1, 2], [3], [4, 5, 6]], block_size=3, eos_id=0)
    assert blocks.tolist() == [[1, 2, 0], [3, 0, 4], [5, 6, 0]]


def test_padded_examples_mask_labels():
    data = PaddedExamples(
        [{"input_ids": [5, 6, 7], "labels": [-100, 6, 7]}, {"input_ids": [8]}], pad_id=0
    )
    b = data.collate([0, 1])
    assert b["input_ids"].tolist() == [[5, 6, 7], [8, 0, 0]]
    assert b["labels"].tolist() == [[-100, 6, 7], [8, -100, -100]]
    assert b["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert math.isfinite(float(torch.tensor(1.0)))

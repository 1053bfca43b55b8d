"""Replay of earlier languages in sequential learning: the buffer, the draw and the mixed set."""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.continual.methods import get_method, with_baseline
from polymnesia.continual.replay import (
    BUFFER_FILE,
    Buffer,
    ReplayBufferConfig,
    add_language,
    draw,
    read_buffer,
    replay_count,
    replayed_examples,
    write_buffer,
)
from polymnesia.errors import DataError
from polymnesia.tasks.classification import ClassificationData
from polymnesia.training.config import EpochTrainConfig
from polymnesia.training.data import IndexStream

RESERVOIR = ReplayBufferConfig(buffer="reservoir", size=10, share=0.25)
QUOTA = ReplayBufferConfig(buffer="per_language", size=4, share=0.5)


def test_replay_is_a_sequential_full_fine_tuning_arm_without_a_plugin() -> None:
    m = get_method("replay")
    assert (m.schedule, m.lora, m.baseline, m.replay) == ("sequential", False, None, True)
    hyper = EpochTrainConfig(lr=1e-3, early_stopping={"max_epochs": 2, "patience": 1})
    assert with_baseline("replay", hyper, True) is hyper


def test_replay_count_makes_the_configured_share() -> None:
    assert replay_count(30, 0.25) == 10  # 10 / (30 + 10) = 0.25
    assert replay_count(32, 0.5) == 32
    assert replay_count(0, 0.5) == 0


def test_per_language_quota_keeps_a_fixed_sample_of_each_language() -> None:
    b = add_language(Buffer(), "en", 20, QUOTA, seed=0)
    b = add_language(b, "fr", 3, QUOTA, seed=0)  # fewer than the quota: all of them
    assert [lang for lang, _ in b.entries] == ["en"] * 4 + ["fr"] * 3
    assert len({i for lang, i in b.entries if lang == "en"}) == 4
    assert sorted(i for lang, i in b.entries if lang == "fr") == [0, 1, 2]
    assert b.seen == 23
    assert add_language(Buffer(), "en", 20, QUOTA, seed=0) == add_language(
        Buffer(), "en", 20, QUOTA, seed=0
    )  # seeded


def test_reservoir_holds_at_most_its_size_and_fills_in_order() -> None:
    b = add_language(Buffer(), "en", 6, RESERVOIR, seed=0)
    assert b.entries == tuple(("en", i) for i in range(6))  # not full yet: everything, in order
    b = add_language(b, "fr", 30, RESERVOIR, seed=0)
    assert len(b.entries) == 10 and b.seen == 36
    assert len(set(b.entries)) == 10  # no example twice


def test_reservoir_keeps_each_example_with_equal_probability() -> None:
    """Algorithm R: after N examples each is in the buffer with probability size/N, so a
    language's expected share is its share of the stream (here 20 of 80 = 1/4), whichever
    came first."""
    cfg = ReplayBufferConfig(buffer="reservoir", size=8, share=0.5)
    shares = []
    for seed in range(400):
        b = add_language(add_language(Buffer(), "en", 20, cfg, seed), "fr", 60, cfg, seed)
        shares.append(sum(lang == "en" for lang, _ in b.entries) / 8)
    mean = sum(shares) / len(shares)
    # binomial-like spread: sd of one share ~ 0.15, of the mean over 400 ~ 0.008
    assert mean == pytest.approx(0.25, abs=0.03)


def test_draw_repeats_the_buffer_evenly_when_more_are_asked() -> None:
    b = Buffer((("en", 0), ("en", 1), ("fr", 5)), 3)
    out = draw(b, 7, seed=0, step=1)
    assert len(out) == 7 and {e: out.count(e) for e in b.entries} in (
        {("en", 0): 3, ("en", 1): 2, ("fr", 5): 2},
        {("en", 0): 2, ("en", 1): 3, ("fr", 5): 2},
        {("en", 0): 2, ("en", 1): 2, ("fr", 5): 3},
    )
    assert draw(Buffer(), 5, 0, 1) == [] and draw(b, 0, 0, 1) == []
    assert draw(b, 7, 0, 1) == out  # seeded


def _examples(lang: str, n: int) -> list[dict]:
    base = {"en": 100, "fr": 200, "ru": 300}[lang]
    return [{"input_ids": [base + i, 7], "labels": i % 3} for i in range(n)]


def test_mixed_batches_contain_earlier_languages_examples() -> None:
    """A step on ru after en and fr: its training set is ru's examples plus examples drawn
    from the buffer, and the batches the loop draws from it (the same IndexStream) hold
    examples of en and fr, each equal to one of those languages' training examples."""
    data = {lang: _examples(lang, 24) for lang in ("en", "fr", "ru")}
    buffer = add_language(add_language(Buffer(), "en", 24, RESERVOIR, 0), "fr", 24, RESERVOIR, 0)
    own = data["ru"]
    replayed = replayed_examples(buffer, replay_count(len(own), 0.25), data.__getitem__, 0, 2)
    assert len(replayed) == 8 and {lang for lang, _ in replayed} <= {"en", "fr"}
    assert all(e in data[lang] for lang, e in replayed)
    mixed = ClassificationData([*own, *(e for _, e in replayed)], pad_id=0)
    stream, earlier = IndexStream(len(mixed), seed=0), 0
    for _ in range(len(mixed) // 8):  # one epoch of batches of 8
        ids = mixed.collate(stream.next(8))["input_ids"][:, 0].tolist()
        earlier += sum(i < 300 for i in ids)  # en (1xx) and fr (2xx) rows
    assert earlier == 8  # every replayed example is trained on once per epoch
    assert replay_count(len(own), 0.25) / len(mixed) == pytest.approx(0.25)


def test_replayed_examples_refuse_a_buffer_of_other_data() -> None:
    b = Buffer((("en", 30),), 31)
    with pytest.raises(DataError, match="example 30 of 'en' is not among its 24"):
        replayed_examples(b, 1, lambda lang: _examples(lang, 24), 0, 1)


def test_buffer_round_trips_and_refuses_other_settings(tmp_path: Path) -> None:
    b = add_language(Buffer(), "en", 12, RESERVOIR, 0)
    write_buffer(tmp_path / BUFFER_FILE, b, RESERVOIR)
    assert read_buffer(tmp_path, RESERVOIR) == b
    assert read_buffer(None, RESERVOIR) == Buffer()
    with pytest.raises(
        DataError, match="reservoir buffer of size 10, this step wants per_language"
    ):
        read_buffer(tmp_path, QUOTA)
    with pytest.raises(DataError, match="no buffer at"):
        read_buffer(tmp_path / "other", RESERVOIR)


def test_config_bounds_are_one_line() -> None:
    from pydantic import ValidationError

    for bad in ({"share": 1.0}, {"share": 0}, {"size": 0}, {"buffer": "ring"}):
        with pytest.raises(ValidationError):
            ReplayBufferConfig(**bad)

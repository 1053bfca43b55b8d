"""Bits per byte above 8 get one line saying what they mean (issue 42, item 4)."""

from __future__ import annotations

from pathlib import Path

from polymnesia.experiments.reporting import lm_tables
from polymnesia.reports.render import Report
from polymnesia.results import Score


def _report(tmp_path: Path, values: dict[str, float]) -> str:
    rep = Report("t")
    scores = [Score("tiny", lang, "bits_per_byte", v) for lang, v in values.items()]
    lm_tables(
        rep, tmp_path, scores, {"pretraining": ["en"], "other": ["ko", "ru"]}, "bits_per_byte"
    )
    md, _ = rep.write(tmp_path)
    return md.read_text(encoding="utf-8")


def test_bits_per_byte_above_8_are_explained(tmp_path: Path) -> None:
    text = _report(tmp_path, {"en": 2.3, "ko": 12.05, "ru": 6.1})
    assert "Bits per byte above 8 (ko): 8 bits is the cost of guessing each byte" in text
    assert "byte-fallback" in text


def test_no_line_when_every_language_is_below_8(tmp_path: Path) -> None:
    assert "Bits per byte above 8" not in _report(tmp_path, {"en": 2.3, "ko": 7.9, "ru": 6.1})

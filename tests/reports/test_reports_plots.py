"""Each plot writes a valid PNG atomically (no temp files left)."""

from __future__ import annotations

import numpy as np
import pytest

from polymnesia.errors import ConfigError, DataError
from polymnesia.reports import plots
from polymnesia.results import Score

PNG = b"\x89PNG\r\n\x1a\n"
GROUPS = {"pre": ["en", "de"], "ad": ["fr", "ja"]}
SCORES = [
    Score(m, lang, "acc", v + i)
    for i, m in enumerate(["A", "B"])
    for lang, v in {"en": 0.5, "de": 0.4, "fr": 0.3, "ja": 0.2, "xx": 0.1}.items()
]


def _check(path):
    data = path.read_bytes()
    assert data[:8] == PNG and len(data) > 1024
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_bar_by_language_single_and_grouped(tmp_path):
    _check(plots.bar_by_language(SCORES, "acc", GROUPS, tmp_path / "one" / "a.png", model="A"))
    _check(plots.bar_by_language(SCORES, "acc", GROUPS, tmp_path / "two" / "b.png"))
    with pytest.raises(DataError, match="no scores for metric 'bleu'"):
        plots.bar_by_language(SCORES, "bleu", GROUPS, tmp_path / "c.png")


def test_line_plot(tmp_path):
    series = {"Baseline": ([4e8, 1.6e9], [0.2, 0.3]), "AFA": ([4e8, 1.6e9], [0.25, 0.33])}
    path = plots.line_plot(series, tmp_path / "l.png", logx=True, xticklabels=["400M", "1.6B"])
    _check(path)
    with pytest.raises(DataError, match="2 x values but 1 y values"):
        plots.line_plot({"x": ([1, 2], [1])}, tmp_path / "bad.png")


def test_heatmap_plain_and_centred_with_nan(tmp_path):
    m = np.arange(12, dtype=float).reshape(3, 4) - 5
    m[0, 0] = np.nan
    rows, cols = ["h0", "h1", "h2"], ["en", "de", "fr", "ja"]
    _check(plots.heatmap(m, rows, cols, tmp_path / "a" / "h.png", title="R"))
    _check(plots.heatmap(m, rows, cols, tmp_path / "b" / "h.png", center=0.0))
    with pytest.raises(ConfigError, match="does not match"):
        plots.heatmap(m, rows, cols[:2], tmp_path / "c.png")


def test_bar_plot_signed(tmp_path):
    path = plots.bar_plot(
        {"en": 0.5, "de": -0.2},
        tmp_path / "b.png",
        signed_colors=True,
        fmt=".2f",
        errors={"en": 0.1},
    )
    _check(path)
    with pytest.raises(DataError, match="no values"):
        plots.bar_plot({}, tmp_path / "e.png")

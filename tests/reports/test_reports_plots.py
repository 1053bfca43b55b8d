"""Every plot function writes one valid PNG atomically; bad inputs give one-line errors."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from polymnesia.errors import ConfigError, DataError, PolymnesiaError
from polymnesia.reports.curves import line_plot, scatter_plot
from polymnesia.reports.heatmaps import heatmap
from polymnesia.reports.plots import bar_by_language, bar_plot, series_colours
from polymnesia.results import Score

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
GROUPS = {"pretraining": ["en", "fr"], "adapting": ["sw"], "other": ["yo", "zu"]}
SCORES = [
    Score(m, lang, "bits_per_byte", v + (0.2 if m == "BA" else 0.0), seed=s)
    for m in ("Baseline", "BA")
    for lang, v in zip(
        ["en", "fr", "sw", "yo", "zu", "xx"], [1.0, 1.1, 1.5, 2.0, 1.8, 2.2], strict=True
    )
    for s in (1, 2)
]


def assert_only_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE and len(data) > 1024
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp files left


@pytest.mark.parametrize("model", ["BA", None])
def test_bar_by_language(tmp_path: Path, model: str | None) -> None:
    out = bar_by_language(
        SCORES, "bits_per_byte", GROUPS, tmp_path / "plots" / "b.png", model=model
    )
    assert out == tmp_path / "plots" / "b.png"
    assert_only_png(out)


def test_line_plot(tmp_path: Path) -> None:
    series = {"Baseline": ([4e8, 1.6e9], [31.4, 28.0]), "BA": ([4e8, 1.6e9], [30.0, 27.5])}
    path = tmp_path / "line.png"
    line_plot(
        series, path, xlabel="parameters", ylabel="ppl", logx=True, xticklabels=["400M", "1.6B"]
    )
    assert_only_png(path)


def test_series_colours_are_stable_and_honoured(tmp_path: Path) -> None:
    from matplotlib.image import imread

    colours = series_colours(["b", "a", "b", "c"])
    assert list(colours) == ["b", "a", "c"] and len(set(colours.values())) == 3
    for draw in (line_plot, scatter_plot):
        path = tmp_path / f"{draw.__name__}.png"
        draw({"red": ([0.0, 1.0], [0.0, 1.0])}, path, colours={"red": "#ff0000"})
        rgb = imread(path)[..., :3]
        red = (rgb[..., 0] > 0.9) & (rgb[..., 1] < 0.1) & (rgb[..., 2] < 0.1)
        assert red.sum() > 20, draw.__name__
        path.unlink()
        draw({"red": ([0.0, 1.0], [0.0, 1.0])}, path)  # no colours: the palette's first
        rgb = imread(path)[..., :3]
        assert not ((rgb[..., 0] > 0.9) & (rgb[..., 1] < 0.1) & (rgb[..., 2] < 0.1)).any()


def test_heatmap_with_center_and_nan(tmp_path: Path) -> None:
    path = tmp_path / "heat.png"
    heatmap(
        [[0.5, -0.2, math.nan], [0.0, 1.0, -1.0]],
        ["s1", "s2"],
        ["en", "fr", "sw"],
        path,
        center=0.0,
    )
    assert_only_png(path)


def test_bar_plot(tmp_path: Path) -> None:
    path = tmp_path / "delta.png"
    bar_plot(
        {"en": 0.3, "fr": -0.1, "sw": 0.05},
        path,
        signed_colors=True,
        sort=True,
        fmt=".2f",
        errors={"en": 0.1},
    )
    assert_only_png(path)


@pytest.mark.parametrize(
    ("call", "error", "needle"),
    [
        (
            lambda p: bar_by_language(SCORES, "bleu", GROUPS, p),
            DataError,
            "no scores for metric 'bleu'",
        ),
        (
            lambda p: bar_by_language(SCORES, "bits_per_byte", GROUPS, p, model="AFA"),
            DataError,
            "model 'AFA'",
        ),
        (lambda p: line_plot({}, p), DataError, "line_plot: no series"),
        (lambda p: line_plot({"a": ([], [])}, p), DataError, "series 'a' has no points"),
        (lambda p: line_plot({"a": ([1, 2], [1])}, p), DataError, "has 2 x values but 1 y values"),
        (
            lambda p: heatmap([[1, 2]], ["r"], ["a"], p),
            ConfigError,
            "does not match 1 row and 1 column",
        ),
        (lambda p: bar_plot({}, p), DataError, "bar_plot: no values"),
    ],
)
def test_bad_inputs_one_line_and_nothing_written(tmp_path: Path, call, error, needle) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=needle) as err:
        call(tmp_path / "x.png")
    assert isinstance(err.value, PolymnesiaError) and "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []

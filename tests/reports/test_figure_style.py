"""The figure style (issue 42, item 1), checked on the drawn artists, not on pixels: every
series looks different, legends sit outside the data, steps get whole-number ticks, figures
read side by side share a colour scale, training loss gets a panel per stage family."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.container import ErrorbarContainer
from matplotlib.figure import Figure

from polymnesia.reports import curves, heatmaps, plots
from polymnesia.reports.style import PALETTE, series_style
from polymnesia.results import Score


@pytest.fixture
def drawn(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """The figures the plot functions save, kept for inspection (the PNG is still written)."""
    figures: list[Figure] = []
    real = plots.save_figure

    def keep(fig: Figure, path: Any) -> Path:
        figures.append(fig)
        return real(fig, path)

    for module in (plots, curves, heatmaps):
        monkeypatch.setattr(module, "save_figure", keep)
    return figures


def _legend_outside(fig: Figure, ax: Any) -> bool:
    FigureCanvasAgg(fig)  # a canvas that renders (the plots draw on a bare Figure)
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    fig.draw(renderer)
    legend = ax.get_legend()
    return legend is not None and legend.get_window_extent(renderer).x0 >= ax.bbox.x1


def test_forty_eight_series_all_look_different() -> None:
    styles = {(s.colour, s.linestyle, s.marker) for s in map(series_style, range(48))}
    assert len(styles) == 48 and len(set(PALETTE)) == 12
    assert series_style(0).linestyle == "-" and series_style(12).linestyle == "--"
    assert series_style(13).colour == series_style(1).colour


def test_a_line_plot_of_25_series_has_distinct_lines_and_an_outside_legend(
    drawn: list[Figure], tmp_path: Path
) -> None:
    series = {f"arm {i}": ([1, 2, 3], [i, i + 1, i + 0.5]) for i in range(25)}
    curves.line_plot(series, tmp_path / "p.png", xlabel="step", ylabel="loss", integer_x=True)
    (fig,) = drawn
    ax = fig.axes[0]
    looks = {(ln.get_color(), ln.get_linestyle(), ln.get_marker()) for ln in ax.get_lines()}
    assert len(looks) == 25
    assert _legend_outside(fig, ax)
    assert len(ax.get_legend().get_texts()) == 25 and ax.get_xlabel() == "step"
    assert all(float(t).is_integer() for t in ax.get_xticks())


def test_a_line_plot_draws_each_interval_as_error_bars(drawn: list[Figure], tmp_path: Path) -> None:
    series = {"a": ([1, 2], [0.5, 0.6]), "b": ([1, 2], [0.4, 0.3]), "c": ([1, 2], [0.2, 0.2])}
    errors = {"a": ([0.4, 0.5], [0.6, 0.7]), "c": ([0.1, 0.1], [0.3, 0.3])}
    curves.line_plot(series, tmp_path / "p.png", errors=errors)
    ax = drawn[0].axes[0]
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 2
    # each series' bars sit a little apart from the others' (no single grey area)
    xs = [seg[0][0] for bar in bars for seg in bar.lines[2][0].get_segments()]
    assert len(set(xs)) == 4
    with pytest.raises(Exception, match="one interval per point"):
        curves.line_plot(series, tmp_path / "q.png", errors={"a": ([0.4], [0.6])})


def test_heatmaps_read_side_by_side_share_one_colour_scale(
    drawn: list[Figure], tmp_path: Path
) -> None:
    a, b = np.array([[0.035, 0.036]]), np.array([[0.039, 0.5]])
    limits = heatmaps.shared_limits([a, b])
    assert limits == (0.035, 0.5)
    for i, m in enumerate((a, b)):
        heatmaps.heatmap(m, ["r"], ["x", "y"], tmp_path / f"{i}.png", limits=limits)
    norms = [f.axes[0].images[0].norm for f in drawn]
    assert all((n.vmin, n.vmax) == limits for n in norms)
    # centred maps keep 0 white and span the larger side of the shared limits
    heatmaps.heatmap(
        a - 0.1, ["r"], ["x", "y"], tmp_path / "c.png", center=0.0, limits=(-0.2, 0.05)
    )
    norm = drawn[-1].axes[0].images[0].norm
    assert (norm.vmin, norm.vcenter, norm.vmax) == (-0.2, 0.0, 0.2)
    assert heatmaps.shared_limits([np.array([np.nan])]) is None


def test_training_loss_gets_a_panel_per_family_with_its_validation_curve(
    drawn: list[Figure], tmp_path: Path
) -> None:
    panels = {
        "pretrain": {"pretrain": ([10, 20, 30], [5.0, 4.0, 3.5])},
        "cft": {"cft_a": ([5, 10], [2.0, 1.8]), "cft_b": ([5, 10], [2.2, 2.1])},
        "mit": {"mit_GR_10": ([5, 10], [2.1, 1.9])},
    }
    dashed = {"pretrain": {"pretrain": ([10, 30], [5.2, 3.9])}}
    curves.panel_lines(panels, tmp_path / "t.png", dashed=dashed, xlabel="optimizer step")
    fig = drawn[0]
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["pretrain", "cft", "mit"]
    assert all(_legend_outside(fig, ax) for ax in visible)
    labels = [t.get_text() for t in visible[0].get_legend().get_texts()]
    assert labels == ["pretrain", "pretrain (validation)"]
    val = visible[0].get_lines()[1]
    assert val.get_linestyle() == "--" and val.get_color() == visible[0].get_lines()[0].get_color()


def test_models_and_language_groups_get_separate_encodings(
    drawn: list[Figure], tmp_path: Path
) -> None:
    """Several models: bars coloured by model, groups as shaded, named bands (issue 42: models
    and groups shared three colours in active_forgetting's bar plot)."""
    groups = {"pretraining": ["en", "fr"], "adapting": ["de"], "other": ["ru"]}
    scores = [
        Score(model, lang, "bits_per_byte", 1.0 + i + 0.1 * j)
        for i, model in enumerate(("Baseline", "BA", "AFA"))
        for j, lang in enumerate(("en", "fr", "de", "ru"))
    ]
    plots.bar_by_language(scores, "bits_per_byte", groups, tmp_path / "b.png")
    ax = drawn[0].axes[0]
    colours = [c.patches[0].get_facecolor() for c in ax.containers]
    assert len(set(colours)) == 3  # one per model
    assert all(len({p.get_facecolor() for p in c.patches}) == 1 for c in ax.containers)
    names = {t.get_text() for t in ax.texts}
    assert {"pretraining", "adapting", "other"} <= names
    assert all(t.get_color() == "black" for t in ax.get_xticklabels())
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["Baseline", "BA", "AFA"]
    assert _legend_outside(drawn[0], ax)


def test_scatter_points_can_carry_labels_intervals_and_their_order(
    drawn: list[Figure], tmp_path: Path
) -> None:
    """two_phase's t-SNE marks each point's layer and joins a model's layers; the EA/MA
    trade-off names each arm and draws both intervals."""
    tsne = {"P1": ([0.0, 1.0, 2.0], [0.0, 0.5, 0.2]), "P2": ([0.1, 1.2, 2.5], [1.0, 1.1, 0.9])}
    layers = {k: [f"L{j}" for j in range(3)] for k in tsne}
    curves.scatter_plot(tsne, tmp_path / "t.png", point_labels=layers, connect=True)
    ax = drawn[0].axes[0]
    assert sorted(t.get_text() for t in ax.texts) == sorted(["L0", "L1", "L2"] * 2)
    assert len(ax.get_lines()) >= 2  # each model's layers joined in order (plus zero lines)
    arms = {"CFT": ([0.1], [-0.2]), "GR_10": ([0.08], [-0.05])}
    bounds = {"CFT": ((0.05, 0.15), (-0.3, -0.1)), "GR_10": ((0.02, 0.14), (-0.1, 0.0))}
    curves.scatter_plot(
        arms, tmp_path / "e.png", point_labels={k: [k] for k in arms}, intervals=bounds
    )
    ax = drawn[1].axes[0]
    assert {t.get_text() for t in ax.texts} == {"CFT", "GR_10"}
    assert len(ax.containers) == 2  # an error bar per arm
    with pytest.raises(Exception, match="one label per point"):
        curves.scatter_plot(arms, tmp_path / "x.png", point_labels={"CFT": ["a", "b"]})


def test_labels_of_points_at_one_place_are_stacked(drawn: list[Figure], tmp_path: Path) -> None:
    """Arms with the same scores (a smoke run's untrained arms) sit on one point: their names
    go one above the other instead of over each other."""
    arms = {"CFT": ([0.04], [0.04]), "Mix": ([0.04], [0.04]), "LoRA": ([0.04], [0.04])}
    arms["GR_10"] = ([0.0], [0.0])
    curves.scatter_plot(arms, tmp_path / "s.png", point_labels={k: [k] for k in arms})
    ax = drawn[0].axes[0]
    offsets = {t.get_text(): t.xyann for t in ax.texts}
    assert offsets["GR_10"] == (3, 3)
    ys = sorted(offsets[k][1] for k in ("CFT", "Mix", "LoRA"))
    assert ys == [3, 3 + curves.LABEL_STEP, 3 + 2 * curves.LABEL_STEP]


def test_heatmap_numbers_take_the_decimals_their_colour_scale_needs(
    drawn: list[Figure], tmp_path: Path
) -> None:
    """lifelong's R maps wrote '0.04' on a purple (0.030) and a yellow (0.039) cell, and MBT
    maps '-0.00' and '0.01' on a scale of +-0.005: the numbers now tell the colours apart."""
    r = np.array([[0.0301, 0.0389], [0.035, np.nan]])
    heatmaps.heatmap(r, ["0:en", "1:fr"], ["en", "fr"], tmp_path / "r.png", limits=(0.03, 0.039))
    assert sorted(t.get_text() for t in drawn[0].axes[0].texts) == ["0.030", "0.035", "0.039"]
    mbt = np.array([[0.0055, -0.0004], [-0.0013, 0.0]])
    heatmaps.heatmap(mbt, ["0", "1"], ["fr", "en"], tmp_path / "m.png", center=0.0)
    texts = sorted(t.get_text() for t in drawn[1].axes[0].texts)
    assert texts == ["-0.001", "0.000", "0.000", "0.005"]  # no '-0.000'
    # an explicit format is kept
    heatmaps.heatmap(r, ["a", "b"], ["x", "y"], tmp_path / "f.png", fmt=".1f")
    assert {t.get_text() for t in drawn[2].axes[0].texts} == {"0.0"}
    assert heatmaps.annotation_format(-0.5, 0.5) == ".2f"
    assert heatmaps.annotation_format(0.0, 0.0) == ".2f"


def test_bar_plots_read_side_by_side_share_one_value_axis(
    drawn: list[Figure], tmp_path: Path
) -> None:
    """lifelong's Figure 3, one bar plot per arm: an arm whose changes are all zero was drawn
    on +-0.04 and the next on 0-0.005; with one range both show the same scale."""
    arms = {"VANILLA": {"en": 0.0, "fr": -0.00001}, "LoRA": {"fr": 0.0055, "ru": -0.0014}}
    limits = plots.shared_range(v for c in arms.values() for v in c.values())
    assert limits is not None and limits[0] < -0.0014 and limits[1] > 0.0055
    for name, change in arms.items():
        plots.bar_plot(
            change, tmp_path / f"{name}.png", signed_colors=True, fmt=".3f", limits=limits
        )
    assert [f.axes[0].get_ylim() for f in drawn] == [limits, limits]
    labels = [t.get_text() for t in drawn[0].axes[0].texts]
    assert labels == ["0.000", "0.000"]  # a tiny loss is not written '-0.000'
    assert plots.shared_range([float("nan")]) is None
    assert plots.shared_range([0.0]) == (-0.05, 0.05)


def test_bar_plot_draws_asymmetric_intervals_around_each_bar(
    drawn: list[Figure], tmp_path: Path
) -> None:
    """lifelong's Figure 3 had no intervals: each bar now spans its own (low, high), which a
    bootstrap gives asymmetric; a label without a finite interval gets no bar."""
    values = {"fr": 0.02, "ru": -0.01, "de": 0.005}
    spans = {"fr": (0.01, 0.05), "ru": (-0.03, -0.005), "de": (float("nan"), 0.01)}
    plots.bar_plot(values, tmp_path / "b.png", intervals=spans, sort=True)
    ax = drawn[0].axes[0]
    (caps_and_lines,) = [c for c in ax.containers if hasattr(c, "lines")]
    segments = caps_and_lines.lines[2][0].get_segments()
    # sorted by value: fr, de, ru; each segment runs from low to high at its bar
    ends = [(round(float(s[0][1]), 6), round(float(s[1][1]), 6)) for s in segments]
    assert ends == [(0.01, 0.05), (0.005, 0.005), (-0.03, -0.005)]


def test_training_loss_panels_stand_in_one_column_as_wide_as_one_plot(
    drawn: list[Figure], tmp_path: Path
) -> None:
    """Side by side, a report scaled a two-column loss figure to half its size and its text
    became unreadable (active_forgetting_smoke): the panels now stand one above the other."""
    panels = {
        f"family {k}": {f"stage {k}{j}": ([1, 2, 3], [3.0, 2.0 + j, 1.0]) for j in range(3)}
        for k in range(3)
    }
    curves.panel_lines(panels, tmp_path / "t.png", xlabel="optimizer step")
    fig = drawn[0]
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert len(visible) == 3 and fig.get_figwidth() == 6.4
    assert len({round(ax.get_position().x0, 6) for ax in visible}) == 1
    tops = [ax.get_position().y0 for ax in visible]
    assert tops == sorted(tops, reverse=True)  # in the order of the families, top to bottom
    assert all(_legend_outside(fig, ax) for ax in visible)

"""The CD diagram writes a real image atomically and refuses bad input."""

import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.stats import average_ranks, bonferroni_dunn_cd
from polymnesia.reports.cd_diagram import cliques, plot_cd_diagram

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
RANKS = {"lf_mlf": 1.0, "uniform": 2.33, "pcgrad": 3.0, "gradvac": 3.67}


def test_writes_png_bonferroni_dunn_form(tmp_path):
    scores = [
        [68.5, 67.45, 67.40, 67.57],
        [63.03, 62.51, 61.74, 61.36],
        [75.56, 75.17, 74.87, 74.67],
    ]
    ranks = dict(zip(RANKS, average_ranks(scores), strict=True))
    out = tmp_path / "figs" / "cd.png"
    plot_cd_diagram(ranks, bonferroni_dunn_cd(4, 3, alpha=0.1), out, reference="lf_mlf")
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC) and len(data) > 1000
    assert [p.name for p in out.parent.iterdir()] == ["cd.png"]  # no temp file left behind


def test_writes_png_nemenyi_form(tmp_path):
    out = tmp_path / "cd.png"
    plot_cd_diagram(RANKS, 1.5, out)
    assert out.read_bytes().startswith(PNG_MAGIC)


def test_cliques_by_hand():
    ranked = sorted(RANKS.items(), key=lambda kv: kv[1])
    # 1.0..2.33 (< 1.5); 2.33..3.67 (< 1.5); 3.0..3.67 is inside the previous one
    assert cliques(ranked, 1.5) == [(0, 1), (1, 3)]
    assert cliques(ranked, 0.1) == []


def test_bad_input(tmp_path):
    with pytest.raises(PolymnesiaError, match="reference 'gem'"):
        plot_cd_diagram(RANKS, 1.0, tmp_path / "x.png", reference="gem")
    with pytest.raises(PolymnesiaError, match="positive"):
        plot_cd_diagram(RANKS, 0.0, tmp_path / "x.png")

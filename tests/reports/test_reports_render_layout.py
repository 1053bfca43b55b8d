"""Report layout: claims first, a table of contents, empty sections dropped, no repeated
captions.
"""

from __future__ import annotations

from pathlib import Path

from polymnesia.reports.claims import Claim
from polymnesia.reports.render import Report, table_html
from polymnesia.reports.table_core import Estimate, Table

CLAIM = Claim("A beats B", +1, 0.1, 0.05, 0.15, 300, "paired bootstrap")
T1 = Table("t1", "Table 1: accuracy", ["Model", "acc"], [["A", Estimate(0.5, 0.45, 0.55, 300)]])


def build() -> Report:
    rep = Report("Run")
    rep.paragraph("What this run is.")
    rep.heading("Table 1: accuracy").table(T1)
    rep.heading("Statistical comparison")  # nothing under it
    rep.heading("Empty parent").heading("Empty child", 3)
    rep.heading("Figures").image("plots/x.png", "Figures")
    rep.claims([CLAIM])
    return rep


def test_markdown_layout() -> None:
    md = build().to_markdown()
    assert md.index("What this run is.") < md.index("## The paper's claims at this scale")
    assert md.index("The paper's claims") < md.index("## Table 1: accuracy")
    assert (
        "Statistical comparison" not in md and "Empty parent" not in md and "Empty child" not in md
    )
    assert "**Table 1: accuracy**" not in md  # the table title repeats its heading
    assert "| A | 0.500 ± 0.050 |" in md
    assert "*Figures*" not in md and "![Figures](plots/x.png)" in md
    assert "1 of the paper's 1 claim was testable at this scale; of those, 1 holds" in md


def test_html_layout(tmp_path: Path) -> None:
    page = build().to_html(tmp_path)
    assert page.index('<h2 id="the-paper-s-claims-at-this-scale">') < page.index(
        '<nav class="toc">'
    )
    assert page.index('<nav class="toc">') < page.index('<h2 id="table-1-accuracy">')
    assert '<a href="#figures">Figures</a>' in page and "Statistical comparison" not in page
    assert '<div class="table-title">' not in page  # deduplicated against the heading
    assert '<meta name="viewport"' in page


def test_table_html_scrolls_and_shows_interval_tooltip() -> None:
    out = table_html(T1)
    assert out.startswith(
        '<div class="table-title">Table 1: accuracy</div>\n<div class="table-wrap"><table>'
    )
    assert '<td title="CI [0.450, 0.550], n = 300">0.500 ± 0.050</td>' in out
    assert "<td>0.50</td>" in table_html(Table("t", "", ["M", "x"], [["A", 0.5]], floatfmt=".2f"))


def test_no_toc_for_a_single_section(tmp_path: Path) -> None:
    page = Report("r").heading("Only").paragraph("x").to_html(tmp_path)
    assert "<nav" not in page

"""Report builder: report.md carries tables and image links, report.html embeds images."""

from __future__ import annotations

import base64

import pytest

from polymnesia.errors import ConfigError
from polymnesia.reports.render import Report, inline_html, table_html
from polymnesia.reports.tables import Table

TABLE = Table(
    name="ppl",
    title="Perplexity",
    columns=["Model", "mu_overall"],
    rows=[["400M"], ["BA", 31.4514], ["AFA", 30.0]],
    caption="Lower is better.",
    block_column="size",
    block_format="Number of parameters = {}",
    bold=[(2, 1)],
)
PNG_BYTES = b"\x89PNG\r\n\x1a\n" + b"fake-image-bytes"


def _report() -> Report:
    r = Report("Run <1>")
    r.heading("Results").paragraph("AFA is **better**, see `ppl`.").table(TABLE)
    r.image("plots/ppl.png", "Per-language perplexity").bullets(["one", "two"]).code("a < b")
    return r


def test_markdown_has_tables_and_image_links(tmp_path):
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "ppl.png").write_bytes(PNG_BYTES)
    md_path, html_path = _report().write(tmp_path)
    md = md_path.read_text()
    assert md.startswith("# Run <1>\n\n## Results\n")
    assert "| Number of parameters = 400M |  |\n| BA | 31.451 |\n| AFA | **30.000** |\n" in md
    assert "![Per-language perplexity](plots/ppl.png)" in md
    assert "- one\n- two\n" in md and "```\na < b\n```" in md
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plots", "report.html", "report.md"]


def test_html_embeds_images_and_escapes(tmp_path):
    (tmp_path / "plots").mkdir()
    (tmp_path / "plots" / "ppl.png").write_bytes(PNG_BYTES)
    _, html_path = _report().write(tmp_path)
    page = html_path.read_text()
    assert f"data:image/png;base64,{base64.b64encode(PNG_BYTES).decode()}" in page
    assert "<title>Run &lt;1&gt;</title>" in page and "a &lt; b" in page
    assert "<strong>better</strong>" in page and "<code>ppl</code>" in page
    assert '<td colspan="2">Number of parameters = 400M</td>' in page
    assert "<td><strong>30.000</strong></td>" in page
    assert 'src="plots/' not in page  # nothing refers outside the file


def test_missing_image_is_visible_not_fatal(tmp_path):
    _, html_path = _report().write(tmp_path)
    assert "[missing image: plots/ppl.png]" in html_path.read_text()


def test_table_html_rows():
    out = table_html(TABLE)
    assert "<th>Model</th><th>mu_overall</th>" in out
    assert "<tr><td>BA</td><td>31.451</td></tr>" in out
    assert '<div class="caption">Lower is better.</div>' in out


def test_inline_html():
    assert inline_html("x*y*z & *it*") == "x*y*z &amp; <em>it</em>"


def test_bad_arguments():
    with pytest.raises(ConfigError, match="heading level 9"):
        Report("t").heading("x", 9)
    with pytest.raises(ConfigError, match="relative to the run folder"):
        Report("t").image("../outside.png")

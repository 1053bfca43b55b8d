"""Report.write: report.md with tables and image links, one self-contained report.html."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from polymnesia.errors import ConfigError
from polymnesia.reports.plots import bar_plot
from polymnesia.reports.render import Report, inline_html, table_html
from polymnesia.reports.tables import Table, to_markdown

TABLE = Table(
    "t1",
    "Table 1: ppl",
    ["Model", "mu_overall"],
    [["Number of parameters = 1M"], ["Baseline", 31.451], ["BA <b>", 30.0]],
    caption="(Lower is better)",
    block_column="size",
)


def build(run_dir: Path) -> Report:
    bar_plot({"en": 1.0, "fr": 2.0}, run_dir / "plots" / "p.png")
    rep = Report("Demo run")
    rep.heading("Results").paragraph("Scores are **means** over `3` seeds.").table(TABLE)
    rep.image("plots/p.png", "Per language").bullets(["one", "two"]).code("polymnesia report RUN")
    return rep


def test_write_markdown(tmp_path: Path) -> None:
    md_path, html_path = build(tmp_path).write(tmp_path)
    assert (md_path, html_path) == (tmp_path / "report.md", tmp_path / "report.html")
    md = md_path.read_text(encoding="utf-8")
    assert md.startswith("# Demo run\n\n## Results\n")
    assert "**Table 1: ppl**\n\n" + to_markdown(TABLE) + "\n*(Lower is better)*\n" in md
    assert "| Baseline | 31.451 |" in md and "| Number of parameters = 1M |  |" in md
    assert "![Per language](plots/p.png)\n\n*Per language*\n" in md
    assert "- one\n- two\n" in md and "```\npolymnesia report RUN\n```\n" in md
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plots", "report.html", "report.md"]


def test_write_html_is_self_contained(tmp_path: Path) -> None:
    _, html_path = build(tmp_path).write(tmp_path)
    page = html_path.read_text(encoding="utf-8")
    png = (tmp_path / "plots" / "p.png").read_bytes()
    assert f'src="data:image/png;base64,{base64.b64encode(png).decode()}"' in page
    assert 'src="plots/' not in page
    assert "<table>" in page and '<td colspan="2">Number of parameters = 1M</td>' in page
    assert "<td>BA &lt;b&gt;</td><td>30.000</td>" in page
    assert "<strong>means</strong>" in page and "<code>3</code>" in page
    assert "<figcaption>Per language</figcaption>" in page


def test_missing_image_is_visible_not_fatal(tmp_path: Path) -> None:
    page = Report("r").image("plots/absent.png").to_html(tmp_path)
    assert '<p class="missing">[missing image: plots/absent.png]</p>' in page


@pytest.mark.parametrize("bad", ["../elsewhere.png", "/tmp/x.png", "plots/../../x.png"])
def test_image_outside_run_folder_rejected(bad: str) -> None:
    with pytest.raises(ConfigError, match="must be relative to the run folder") as err:
        Report("r").image(bad)
    assert "\n" not in str(err.value)


def test_heading_level_checked() -> None:
    with pytest.raises(ConfigError, match="heading level 7 is out of range; accepted: 1 to 6"):
        Report("r").heading("x", 7)


def test_inline_html_and_bold_cells() -> None:
    assert inline_html("a *b* **c** `d<e`") == "a <em>b</em> <strong>c</strong> <code>d&lt;e</code>"
    t = Table("t", "", ["M", "x"], [["A", 1.0]], bold=[(0, 1)])
    assert "<td>A</td><td><strong>1.000</strong></td>" in table_html(t)


def test_a_banner_opens_the_report_under_its_title(tmp_path: Path) -> None:
    """A smoke config's report says at once that it tests the code, not the paper (issue 42)."""
    rep = Report("two_phase_smoke: two-phase CFT", banner="Smoke test: checks the pipeline.")
    rep.heading("Tables", 2).paragraph("x")
    md, page = rep.write(tmp_path)
    lines = md.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# two_phase_smoke: two-phase CFT"
    assert lines[2] == "> **Smoke test: checks the pipeline.**"
    html_text = page.read_text(encoding="utf-8")
    assert html_text.index('<p class="banner">Smoke test') < html_text.index("Tables")
    assert "banner" not in Report("t").to_markdown()

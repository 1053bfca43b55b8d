"""report.html as a user sees it: rendered by headless Chromium at laptop widths.

A realistic report (claims block, tables with intervals, a 23-column matrix,
two figures, a long path in a paragraph, a long code line) is written, then
Chromium loads a copy with a small checking script appended and prints the
DOM (``--dump-dom``); the script records whether every image decoded and
whether anything sticks out of the page. A screenshot is taken as well.
Skipped, with the reason, where no Chromium is installed (Debian:
``apt-get install chromium``; ``.ci/run`` and ``make test`` install it where
apt is available).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from polymnesia.metrics.uncertainty import Interval
from polymnesia.reports.claims import Claim, baseline_table, label_baselines
from polymnesia.reports.plots import bar_by_language, heatmap
from polymnesia.reports.render import Report
from polymnesia.reports.tables import group_table, language_table, matrix_table
from polymnesia.results import Score

CHROMIUM = next(
    (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None
)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (Debian: apt-get install chromium); "
    "the browser check of report.html is skipped",
)

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--hide-scrollbars",
]

LANGS = [
    "en",
    "de",
    "fr",
    "es",
    "it",
    "pt",
    "nl",
    "sv",
    "ru",
    "pl",
    "cs",
    "tr",
    "ar",
    "he",
    "hi",
    "bn",
    "zh",
    "ja",
    "ko",
    "vi",
    "id",
    "sw",
]
GROUPS = {"pretraining": LANGS[:8], "adapting": LANGS[8:15], "other": LANGS[15:]}

CHECK = """
<script>
window.addEventListener("load", () => {
  const de = document.documentElement;
  const width = de.clientWidth;
  const imgs = [...document.images];
  const outside = [...document.body.querySelectorAll("*")]
    .filter(e => !e.closest(".table-wrap, pre") && e.getBoundingClientRect().right > width + 1)
    .map(e => e.tagName + "." + e.className);
  const wraps = [...document.querySelectorAll(".table-wrap")];
  const out = {
    width, pageWidth: de.scrollWidth, images: imgs.length,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt),
    tooWide: imgs.filter(i => i.getBoundingClientRect().width > width).map(i => i.alt),
    outside, tables: wraps.length,
    scrolling: wraps.filter(w => w.scrollWidth > w.clientWidth + 1).length,
    toc: document.querySelectorAll("nav.toc a").length,
    firstSection: document.querySelector("h1 ~ h2").textContent,
  };
  const pre = document.createElement("pre");
  pre.id = "polymnesia-checks";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def _scores() -> list[Score]:
    rng = np.random.default_rng(0)
    out = []
    for model, shift in (("Baseline", 0.0), ("BA", -0.05), ("AFA", -0.08)):
        for lang in LANGS:
            v = float(1.2 + shift + rng.normal(0, 0.1))
            h = float(rng.uniform(0.01, 0.05))
            out.append(
                Score(
                    model,
                    lang,
                    "bits_per_byte",
                    v,
                    size="base",
                    params=620_000,
                    ci_low=v - h,
                    ci_high=v + h,
                    n=300,
                )  # fmt: skip
            )
    return out


def _report(run_dir: Path) -> Report:
    scores = _scores()
    rep = Report("laptop run: active forgetting (paper 000)")
    rep.paragraph(
        "Written to `runs/active_forgetting-0123456789abcdef/results/"
        "a_very_long_file_name_without_any_space_that_must_wrap_instead_of_overflowing.csv`."
    )
    rep.claims(
        [
            Claim(
                "AFA has lower bits per byte than BA (overall)",
                -1,
                -0.03,
                -0.05,
                -0.01,
                6600,
                "paired bootstrap over 6600 texts (1000 resamples)",
                source="paper 000, Table 1",
            ),
            Claim(
                "BA is worse than Baseline on 'other' languages",
                +1,
                -0.05,
                -0.09,
                -0.01,
                2100,
                "paired bootstrap over 2100 texts (1000 resamples)",
            ),
            Claim(
                "AFA ahead on zero-shot genre accuracy",
                +1,
                0.01,
                -0.02,
                0.04,
                1980,
                "paired bootstrap over 1980 verses (1000 resamples)",
            ),
        ]  # fmt: skip
    )
    rep.heading("Table 1: Bits per byte by language group", 2)
    rep.table(group_table(scores, "bits_per_byte", GROUPS, model_order=["Baseline", "BA", "AFA"],
                          title="Table 1: Bits per byte by language group"))  # fmt: skip
    rep.heading("Per language", 3).table(language_table(scores, "bits_per_byte", GROUPS))
    bar_by_language(scores, "bits_per_byte", GROUPS, run_dir / "plots" / "bpb.png")
    rep.image("plots/bpb.png", "Bits per byte per language with 95% intervals, by group.")
    rep.heading("Statistical comparison", 2)  # nothing follows: the section must disappear
    rep.heading("Transfer", 2)
    mat = np.random.default_rng(1).uniform(0, 1, (22, 22))
    rep.table(matrix_table(mat, LANGS, LANGS, "R", "Transfer matrix R (22 x 22)", corner="after"))
    heatmap(mat, LANGS, LANGS, run_dir / "plots" / "R.png", title="R")
    rep.image("plots/R.png", "Transfer")
    gold = [0] * 50 + [1] * 30 + [2] * 20
    base = label_baselines(gold)
    rep.heading("Did the models learn?", 2).table(
        baseline_table([("AFA", "en", "accuracy", Interval(0.61, 0.52, 0.70, 100), base)])
    )
    rep.code(
        "polymnesia compare " + " ".join(f"runs/run-{i:02d}-0123456789abcdef" for i in range(8))
    )
    return rep


def _chromium(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'chromium-profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


def _checks(html_path: Path, width: int, tmp: Path) -> dict[str, object]:
    page = html_path.read_text(encoding="utf-8").replace("</body>", CHECK + "</body>")
    probe = html_path.with_name(f"probe-{width}.html")
    probe.write_text(page, encoding="utf-8")
    res = _chromium(
        [f"--window-size={width},800", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
        tmp,
    )
    found = re.search(r'<pre id="polymnesia-checks">(.*?)</pre>', res.stdout, re.S)
    assert found, f"Chromium printed no check results (rc {res.returncode}): {res.stderr[-2000:]}"
    return dict(json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&")))


@pytest.fixture(scope="module")
def report_html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("run")
    _, html_path = _report(run_dir).write(run_dir)
    return html_path


def test_report_html_is_self_contained(report_html: Path) -> None:
    page = report_html.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page), "no resource from the network"
    assert "<script" not in page and "<link" not in page
    assert page.count("data:image/png;base64,") == 2


@needs_chromium
@pytest.mark.parametrize("width", [1280, 1024])
def test_report_renders_within_a_laptop_screen(
    report_html: Path, width: int, tmp_path: Path
) -> None:
    got = _checks(report_html, width, tmp_path)
    assert got["width"] == width
    assert got["images"] == 2 and got["broken"] == [] and got["tooWide"] == []
    assert got["pageWidth"] == width and got["outside"] == [], got
    assert got["tables"] == 5 and got["scrolling"] >= 1  # the 23-column matrix scrolls in its box
    assert got["firstSection"] == "The paper's claims at this scale"
    assert got["toc"] == 5  # claims, Table 1, Per language, Transfer, Did the models learn?


@needs_chromium
def test_screenshot(report_html: Path, tmp_path: Path) -> None:
    from matplotlib.image import imread

    shot = tmp_path / "report.png"
    res = _chromium(
        [f"--screenshot={shot}", "--window-size=1366,768", report_html.as_uri()], tmp_path
    )
    assert shot.is_file(), f"no screenshot (rc {res.returncode}): {res.stderr[-2000:]}"
    pixels = imread(shot)
    assert pixels.shape[:2] == (768, 1366)
    assert pixels[..., :3].std() > 0.05  # not a blank page

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
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from polymnesia.metrics.uncertainty import Interval
from polymnesia.reports.baselines import baseline_table, label_baselines
from polymnesia.reports.claims import Claim
from polymnesia.reports.heatmaps import heatmap
from polymnesia.reports.plots import bar_by_language
from polymnesia.reports.render import Report
from polymnesia.reports.tables import Table, group_table, language_table, matrix_table
from polymnesia.reports.verdicts import SeedNoise
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
                )
            )
    return out


def _report(run_dir: Path) -> Report:
    scores = _scores()
    rep = Report("laptop run: active forgetting (Aggarwal et al. 2024)")
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
                source="Aggarwal et al. 2024, Table 1",
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
        ]
    )
    rep.heading("Table 1: Bits per byte by language group", 2)
    rep.table(
        group_table(
            scores,
            "bits_per_byte",
            GROUPS,
            model_order=["Baseline", "BA", "AFA"],
            title="Table 1: Bits per byte by language group",
        )
    )
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
    # active_forgetting's setup checks: a sentence per row, which once widened its table past
    # the page (the cells of text wrap now)
    rep.table(
        Table(
            "translation_floor",
            "Did the models translate? chrF against the floor of unrelated references",
            ["#", "Check", "Verdict", "Effect [95% CI]", "p", "n"],
            [
                [i, f"{arm} translates: chrF above the floor of unrelated references (3 languages)",
                 "? inconclusive", "chrF − floor: +0.000 [-0.477, +0.477]", 1.0, 6]
                for i, arm in enumerate(("Baseline", "BA", "AFA"), 1)
            ],
        )
    )  # fmt: skip
    rep.code(
        "polymnesia compare " + " ".join(f"runs/run-{i:02d}-0123456789abcdef" for i in range(8))
    )
    return rep


def _chromium(args: list[str], tmp: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    cmd = [CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'chromium-profile'}", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


def _checks(html_path: Path, width: int, tmp: Path, script: str = "") -> dict[str, object]:
    """Chromium's answer to a checking script (default :data:`CHECK`) run on the loaded page."""
    page = html_path.read_text(encoding="utf-8").replace("</body>", (script or CHECK) + "</body>")
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
    # the 23-column matrix scrolls in its box; the setup checks' sentences wrap instead
    assert got["tables"] == 6 and got["scrolling"] == 1, got
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


# ------------------------------------------------------------ the claims table at 1,280 px

CLAIMS_CHECK = """
<script>
window.addEventListener("load", () => {
  const de = document.documentElement;
  const width = de.clientWidth;
  const wrap = document.querySelector(".claims .table-wrap");
  const table = wrap.querySelector("table");
  const box = wrap.getBoundingClientRect();
  const cells = [...table.querySelectorAll("th, td")];
  const clipped = cells.filter(c => {
    const r = c.getBoundingClientRect();
    return r.right > box.right + 1 || r.right > width + 1 || c.scrollWidth > c.clientWidth + 1;
  }).map(c => c.textContent.slice(0, 40));
  const rows = [...table.querySelectorAll("tbody tr")].map(r => r.getBoundingClientRect().height);
  const heads = [...table.querySelectorAll("th")].map(h => h.textContent);
  const out = {
    width, pageWidth: de.scrollWidth, wrapScroll: wrap.scrollWidth - wrap.clientWidth,
    tableRight: table.getBoundingClientRect().right, clipped, heads,
    rows: rows.length, tallest: Math.max(...rows),
  };
  const pre = document.createElement("pre");
  pre.id = "polymnesia-checks";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>
"""


def _realistic_claims() -> list[Claim]:
    """the two-phase CFT paper's eleven claims as a laptop run prints them (long labels and test
    names, a
    non-inferiority margin, claims set aside with their reasons, a p-value of 0), the four
    Phase 2 claims with the seed-noise band a one-seed two_phase report prints beside each
    (as active_forgetting's and lifelong's do), and a one-seed claim judged with its band,
    the paper's number and its headroom."""
    test = "paired bootstrap over documents, stratified by task (1000 resamples)"
    src = "the two-phase CFT paper, Table 5"
    band = SeedNoise(0.0213, (1, 2), "configs/two_phase.yaml at commit 1c6073a")
    return [
        Claim("Phase 1 on english teaches the English tasks (EA above the base)", 1, 0.117, 0.037,
              0.2, 1500, test, 0.004, "EA(P1) - EA(base)", "setup"),
        Claim("CFT beats the mixture (english -> similar), mean of EA and MA", 1, 0.015, -0.013,
              0.044, 2700, test, 0.31, "Combined(CFT) - Combined(mixture)",
              "the two-phase CFT paper, Tables 1-2", noise=band),
        Claim("Phase 2 on a similar set keeps English ability, within the margin of 0.05 "
              "(english -> similar)", 1, -0.01, -0.057, 0.037, 1500, test, 0.68,
              "EA(P2) - EA(P1)", "the two-phase CFT paper, Table 1 ('retains (or improves)')",
              margin=0.05,
              noise=band),
        Claim("CFT beats the mixture (english -> dissimilar), mean of EA and MA", 1, -0.202,
              -0.244, -0.163, 2700, test, 0.0, "Combined(CFT) - Combined(mixture)",
              "the two-phase CFT paper, Tables 1-2",
              noise=band),
        Claim("Phase 2 on a dissimilar set loses English ability (english -> dissimilar)", -1,
              -0.247, -0.313, -0.177, 1500, test, 0.0, "EA(P2) - EA(P1)",
              "the two-phase CFT paper, Table 1",
              noise=band),
        *[Claim(f"{arm} keeps English ability better than plain CFT", 1, e, e - 0.05, e + 0.05,
                1500, test, 0.04, f"EA({arm}) - EA(CFT)", src)
          for arm, e in (("GR_10", 0.057), ("ER_10", 0.067), ("LF_H2", 0.0), ("Spectrum", 0.027))],
        Claim("LoRA keeps English ability better than plain CFT", 1, -0.067, -0.127, -0.003,
              1500, test, 0.041, "EA(LoRA) - EA(CFT)", src,
              not_applicable="plain CFT on english -> similar lost no English ability "
              "(-0.010 [-0.057, +0.037])"),
        Claim("VANILLA forgets: CBT < 0", -1, -0.061, -0.075, -0.047, 660,
              "paired bootstrap over test items (1000 resamples)", 0.001, "CBT(VANILLA)",
              "Khelli et al. 2025 Table 2: -0.08", df=812.4, noise=SeedNoise(0.0093, (1, 2)),
              paper="-0.08 (Table 2)", headroom=0.75),
        Claim("SHARED LoRA r=11 forgets more than VANILLA (lower CBT)", -1, -0.02, -0.04, -0.001,
              660, "paired bootstrap over test items (1000 resamples)", 0.03,
              "CBT(SHARED LoRA r=11) − CBT(VANILLA)",
              "Khelli et al. 2025 Table 2: -0.12 to -0.14 vs -0.08",
              not_testable="arm SHARED LoRA r=11 did not learn"),
    ]  # fmt: skip


@needs_chromium
def test_claims_table_fits_a_1280_px_window(tmp_path: Path) -> None:
    rep = Report("two_phase: two-phase continual instruction fine-tuning (the two-phase CFT paper)")
    rep.paragraph("Base: a tiny decoder pretrained on six Bible languages.")
    rep.claims(_realistic_claims())
    _, page = rep.write(tmp_path)
    # the screenshot a reader sees (kept under $POLYMNESIA_SCREENSHOTS when set)
    shot = tmp_path / "claims-1280.png"
    res = _chromium([f"--screenshot={shot}", "--window-size=1280,900", page.as_uri()], tmp_path)
    assert shot.is_file(), f"no screenshot (rc {res.returncode}): {res.stderr[-2000:]}"
    keep = os.environ.get("POLYMNESIA_SCREENSHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / shot.name)
    got = _checks(page, 1280, tmp_path, CLAIMS_CHECK)
    assert got["width"] == 1280 and got["pageWidth"] == 1280, got
    assert got["heads"] == [
        "#",
        "Claim (paper)",
        "Verdict",
        "Effect [95% CI]",
        "p",
        "p (Holm)",
        "n",
        "Test",
    ]
    assert got["wrapScroll"] <= 1 and got["tableRight"] <= 1280, got  # nothing to scroll to
    assert got["clipped"] == [], got  # every column, n and Test included, whole
    assert got["rows"] == 12 and got["tallest"] < 160, got  # no row of blank space
    text = page.read_text(encoding="utf-8")
    assert "&lt; 0.001" in text and "p = 0" not in text
    # the bands are there, each on its own lines inside the effect and verdict cells
    assert text.count("with seed noise") == 5 and text.count("seed sd 0.021") == 4

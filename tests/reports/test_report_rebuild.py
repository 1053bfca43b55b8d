"""``polymnesia report RUN_DIR`` rebuilds every protocol's report from the run folder alone.

Each protocol's smoke run is copied, the stage cache is deleted (the copy's ``stages/`` links
now lead nowhere), and the report is rebuilt on the copy: every table, the Markdown and the
self-contained HTML (figures embedded) come out byte for byte as the run wrote them (issue 28,
"One evidence path").
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from polymnesia.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from smoke import SMOKE  # noqa: E402

from golden import mismatches  # noqa: E402

pytestmark = pytest.mark.integration
CONFIGS = Path(__file__).resolve().parents[2] / "configs"
#: protocol -> (config, overrides, golden scores) of its smoke run
PROTOCOLS = {
    "language_modeling": ("quickstart.yaml", SMOKE, "quickstart"),
    "active_forgetting": ("active_forgetting_smoke.yaml", [], "active_forgetting_smoke"),
    "lf_mlf": ("lf_mlf_smoke.yaml", [], "lf_mlf_smoke"),
    "lifelong": ("lifelong_smoke.yaml", [], "lifelong_smoke"),
    "two_phase": ("two_phase_smoke.yaml", [], "two_phase_smoke"),
}
#: what a report writes (its inputs, results/*.jsonl, are the run's records)
REPORT_FILES = ("report.md", "report.html", "results/*.csv", "results/*.md", "results/R/*")


def report_files(run: Path) -> dict[str, bytes]:
    out = {}
    for pattern in REPORT_FILES:
        for p in sorted(run.glob(pattern)):
            if p.is_file():
                out[str(p.relative_to(run))] = p.read_bytes()
    return out


@pytest.mark.timeout(2400)  # two_phase's smoke run takes 15 min on two busy CPU cores
@pytest.mark.parametrize("protocol", list(PROTOCOLS))
def test_report_rebuilds_identically_without_the_cache(
    protocol: str, isolated_cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, overrides, golden = PROTOCOLS[protocol]
    run = tmp_path / "run"
    assert main(["run", str(CONFIGS / config), *overrides, "--run-dir", str(run)]) == 0
    assert mismatches(run, golden) == []  # the records the reports read keep their scores
    written = report_files(run)
    assert "report.md" in written and "report.html" in written
    assert any(k.endswith(".csv") for k in written)

    copy = tmp_path / "copy"
    shutil.copytree(run, copy, symlinks=True)
    shutil.rmtree(isolated_cache)  # every stage's cache entry is gone
    assert not any(link.exists() for link in (copy / "stages").iterdir())
    for rel in written:
        (copy / rel).unlink()
    capsys.readouterr()
    assert main(["report", str(copy)]) == 0
    assert capsys.readouterr().out.strip() == str(copy / "report.md")
    rebuilt = report_files(copy)
    assert sorted(rebuilt) == sorted(written)
    assert [k for k in written if rebuilt[k] != written[k]] == []

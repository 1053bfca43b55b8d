"""``polymnesia report RUN_DIR`` rebuilds a protocol's report from the run folder alone.

Called at the end of each protocol's golden end-to-end test, on the run it made: the run is
copied, the stage cache is deleted (the copy's ``stages/`` links then lead nowhere), and the
report is rebuilt on the copy; every table, the Markdown and the self-contained HTML (figures
embedded) must come out byte for byte as the run wrote them (issue 28, "One evidence path").
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

from polymnesia.cli.main import main

#: what a report writes (its inputs, results/*.jsonl, are the run's records)
REPORT_FILES = ("report.md", "report.html", "results/*.csv", "results/*.md", "results/R/*")


def report_files(run: Path) -> dict[str, bytes]:
    out = {}
    for pattern in REPORT_FILES:
        for p in sorted(run.glob(pattern)):
            if p.is_file():
                out[str(p.relative_to(run))] = p.read_bytes()
    return out


def assert_report_rebuilds(
    run: Path, cache: Path, copy: Path, *, legacy: Path | None = None
) -> None:
    """Rebuild ``run``'s report on ``copy`` with ``cache`` deleted; it must be identical.

    ``legacy``: a second copy whose ``run.json`` records no stage seeds (a run folder written
    before stages recorded them, read by the old name rule) must rebuild identically too."""
    written = report_files(run)
    assert "report.md" in written and "report.html" in written
    assert any(k.endswith(".csv") for k in written)
    copies = [copy] if legacy is None else [copy, legacy]
    for c in copies:
        shutil.copytree(run, c, symlinks=True)
    if legacy is not None:
        record = json.loads((legacy / "run.json").read_text(encoding="utf-8"))
        assert all("seeds" in info for info in record["stages"].values())
        for info in record["stages"].values():
            del info["seeds"], info["unseeded"]
        (legacy / "run.json").write_text(json.dumps(record), encoding="utf-8")
    shutil.rmtree(cache)  # every stage's cache entry is gone
    for c in copies:
        assert not any(link.exists() for link in (c / "stages").iterdir())
        for rel in written:
            (c / rel).unlink()
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["report", str(c)]) == 0
        assert out.getvalue().strip() == str(c / "report.md")
        rebuilt = report_files(c)
        assert sorted(rebuilt) == sorted(written)
        assert [k for k in written if rebuilt[k] != written[k]] == []

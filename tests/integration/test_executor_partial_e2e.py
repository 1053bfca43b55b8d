"""A stage that fails for good under ``--executor local --jobs 2`` stops only the stages that
need it: the run still writes its report from the arms that finished, opening with a banner
that names the missing arm, the stage that failed and its log, and exits 1 in one line naming
that log. The other arms' numbers are those of the inline run; run again without the fault,
the run is whole and its report is the inline run's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_executor_local_e2e import CONFIG, SMALL, TIMED, _rows, _sections

pytestmark = pytest.mark.integration
FAULTS = str(Path(__file__).resolve().parents[1] / "faults.py")
#: the stage made to fail: EWC's second step (its first finishes, its third is held back)
FAILS = "ewc_resource_1"


def _run(tmp_path: Path, name: str, *extra: str, fault: bool = False) -> tuple[Path, int, str]:
    from polymnesia.paths import cache_dir

    run, cache = tmp_path / name, tmp_path / f"cache-{name}"
    bible = cache_dir() / "data" / "bible"
    if bible.exists() and not (cache / "data" / "bible").exists():  # the download is shared
        (cache / "data").mkdir(parents=True, exist_ok=True)
        (cache / "data" / "bible").symlink_to(bible)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "POLYMNESIA_CACHE": str(cache)}
    head = [FAULTS, f"fail-stage={FAILS}", "--"] if fault else ["-m", "polymnesia"]
    cmd = [sys.executable, *head, "run", CONFIG, *SMALL, "--run-dir", str(run), *extra]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1200)
    return run, res.returncode, res.stdout + res.stderr


def _without(path: Path, model: str) -> list[str]:
    keep = [x for x in path.read_text().splitlines() if json.loads(x).get("model") != model]
    tmp = path.with_name(f"{path.stem}-without{path.suffix}")
    tmp.write_text("".join(x + "\n" for x in keep))
    return _rows(tmp)


@pytest.mark.timeout(1800)  # two runs of the shrunk config beside the shared inline one
def test_a_failed_stage_leaves_the_report_of_the_other_arms(
    tmp_path: Path, small_lifelong_inline: tuple[Path, Path]
) -> None:
    inline, _ = small_lifelong_inline
    local = ["--executor", "local", "--jobs", "2"]
    part, code, out = _run(tmp_path, "local", *local, fault=True)
    assert code == 1, out[-3000:]
    log = part / "logs" / "ewc_resource_0.log"  # the child that built EWC's chain
    (error,) = [x for x in out.splitlines() if x.startswith("[polymnesia] error: ")]
    assert f"1 stage(s) failed: {FAILS} (log {log}); not run: ewc_resource_2" in error
    assert f"report of the other arms: {part / 'report.md'} (missing arms: EWC)" in error
    assert f"injected fault: stage {FAILS} fails" in log.read_text()

    md = (part / "report.md").read_text()
    assert (
        f"> **Arm EWC is missing: stage {FAILS} failed (log: {log}); its stages not run or "
        "left out: ewc_resource_0, ewc_resource_2.**" in md
    )
    assert "so arm EWC is left out of this report" in md
    assert "Arm EWC is missing" in (part / "report.html").read_text()
    # the other arms' records are the inline run's; no record of EWC's finished first step
    for f in ("results/scores.jsonl", "results/items.jsonl"):
        assert _rows(part / f) == _without(inline / f, "EWC"), f
    # every table row of the other arms reads as in the inline run
    want, got = _sections(inline / "report.md"), _sections(part / "report.md")
    assert list(got) == list(want)
    for heading in want:
        if heading in TIMED:
            continue
        rows = [x for x in want[heading].splitlines() if x.startswith("| VANILLA")]
        assert rows == [x for x in got[heading].splitlines() if x.startswith("| VANILLA")]
        assert "EWC" not in got[heading] or heading == "", heading
    record = json.loads((part / "run.json").read_text())
    assert record["missing"]["arms"] == ["EWC"]
    assert {"ewc_resource_0", FAILS, "ewc_resource_2"}.isdisjoint(record["stages"])
    assert not (part / "stages" / "ewc_resource_0").exists()
    # `polymnesia report` rebuilds the partial report (it refuses other unfinished runs)
    rebuilt = subprocess.run(
        [sys.executable, "-m", "polymnesia", "report", str(part)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert rebuilt.returncode == 0, rebuilt.stderr[-3000:]
    assert _sections(part / "report.md") == got

    # without the fault the same command builds what is missing: the run is whole again
    again, code, out = _run(tmp_path, "local", *local)
    assert code == 0, out[-3000:]
    assert "missing" not in json.loads((again / "run.json").read_text())
    whole = _sections(again / "report.md")
    assert "Incomplete run" not in (again / "report.md").read_text()
    for heading in want:
        if heading not in TIMED:
            assert whole[heading] == want[heading], heading

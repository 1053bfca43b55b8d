"""The new_token_init protocol end to end through the CLI on its smoke config."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from partial_run import assert_partial_report

from polymnesia.cli.main import main
from polymnesia.experiments.new_token_init import report as nti_report
from polymnesia.items import run_items
from polymnesia.reports.verdicts import VERDICTS
from polymnesia.results import read_scores

ROOT = Path(__file__).resolve().parents[2]
INITS = {"mean", "subtoken_mean", "focus", "align", "wechsel"}


@pytest.mark.integration
def test_smoke_run_scores_every_arm_at_every_step(
    isolated_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_dir = tmp_path / "run"
    config = str(ROOT / "configs" / "new_token_init_smoke.yaml")
    drawn: list[Any] = []
    real_save = nti_report.save_figure

    def keep(fig: Any, path: Any) -> Path:
        drawn.append(fig)
        return real_save(fig, path)

    monkeypatch.setattr(nti_report, "save_figure", keep)
    assert main(["run", config, "--run-dir", str(run_dir)]) == 0
    # the figure style: one colour per init, whole-number steps, the legend beside the panels
    (fig,) = drawn
    top = fig.axes[1]  # the last base's upper panel holds the legend
    colours = {line.get_label(): line.get_color() for line in top.get_lines()}
    assert set(colours) == INITS and len(set(colours.values())) == len(INITS)
    assert all(float(t).is_integer() for t in top.get_xticks())
    FigureCanvasAgg(fig)
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)
    assert top.get_legend().get_window_extent(renderer).x0 >= top.bbox.x1
    scores = [s for s in read_scores(run_dir / "results" / "scores.jsonl") if s.step is not None]
    cells = {(s.model, s.setting, s.step, s.lang) for s in scores if s.metric == "bits_per_byte"}
    assert cells == {
        (b, i, step, lang)
        for b in ("standard", "af")
        for i in INITS
        for step in (0, 2, 4)
        for lang in ("en", "es", "fr")
    }
    assert all(s.ci_low is not None and s.ci_low <= s.value <= s.ci_high for s in scores)  # type: ignore[operator]
    by = {(s.model, s.setting, s.step): s.value for s in scores if s.lang == "fr"}
    for b in ("standard", "af"):  # relearning the new rows lowers the new language's bpb
        assert all(by[(b, i, 4)] < by[(b, i, 0)] for i in INITS)
    items = [s for s in run_items(run_dir) if s.stage and s.stage.startswith("relearn_")]
    assert len(items) == 2 * len(INITS) * 3 * 3
    report = (run_dir / "report.md").read_text(encoding="utf-8")
    for step in (0, 2, 4):
        assert f"Bits per byte after {step} relearning steps" in report
    assert (run_dir / "plots" / "bpb_vs_steps.png").stat().st_size > 0
    assert "wechsel beats mean at 0 steps (standard base)" in report
    assert "active forgetting narrows the gap between align and mean (4 steps)" in report
    assert any(v in report for v in VERDICTS)
    csv = (run_dir / "results" / "relearning.csv").read_text(encoding="utf-8")
    assert csv.splitlines()[0].startswith("base/init/step,bpb,bpb_ci_low,bpb_ci_high,bpb_n,")
    assert len(csv.splitlines()) == 1 + 2 * len(INITS) * 3
    assert (run_dir / "results" / "claims.csv").is_file()
    assert (run_dir / "results" / "bpb_step4.csv").is_file()
    # one vocabulary entry serves both bases and every init
    stages = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))["stages"]
    assert [n for n in stages if "vocabulary" in n] == ["vocabulary"]
    # one relearning of the active-forgetting base lost for good: that base is left out
    part = assert_partial_report(config, [], run_dir, "relearn_af_focus", "af", tmp_path / "p")
    assert part["stages"]["pretrain_af"]["state"] == "left out"
    assert "standard" in (tmp_path / "p" / "results" / "relearning.csv").read_text()

"""A run's report rebuilt from what its run folder holds (``polymnesia report RUN_DIR``).

:func:`rebuild_report` is the library entry point the command line calls: it loads the
run's ``config.yaml``, refuses an unfinished run or damaged result files in one line, and
calls the protocol's ``report``. A run whose executor lost stages for good is rebuilt as the
partial report ``polymnesia run`` wrote (:mod:`polymnesia.pipeline.partial`).
"""

from __future__ import annotations

from pathlib import Path

from polymnesia.errors import PolymnesiaError
from polymnesia.experiments.base import EXPERIMENTS
from polymnesia.experiments.loading import load_run_config
from polymnesia.experiments.preflight import build_specs
from polymnesia.io import check_jsonl
from polymnesia.pipeline.partial import read_missing
from polymnesia.pipeline.run_dir import missing_stages


def rebuild_report(run_dir: Path) -> Path:
    """The report of ``run_dir`` written again from its saved results; its path."""
    cfg = load_run_config(run_dir)
    exp = EXPERIMENTS.get(cfg.experiment)
    names = [s.name for s in build_specs(exp, cfg, str(run_dir / "config.yaml"))]
    missing = missing_stages(run_dir, names)
    partial = read_missing(run_dir)  # a run that lost stages for good: its partial report
    if missing and not (partial and set(missing) <= set(partial["stages"])):
        shown = ", ".join(missing[:10]) + (", ..." if len(missing) > 10 else "")
        raise PolymnesiaError(
            f"{run_dir} is incomplete: {len(missing)} of {len(names)} stages have not finished "
            f"({shown}); finish it with `polymnesia run {run_dir / 'config.yaml'} --run-dir "
            f"{run_dir}`"
        )
    scores = run_dir / "results" / "scores.jsonl"
    if not scores.exists():
        raise PolymnesiaError(
            f"{run_dir} has no results/scores.jsonl yet; run the experiment first"
        )
    check_jsonl(scores)
    if (run_dir / "metrics.jsonl").exists():
        check_jsonl(run_dir / "metrics.jsonl")
    return exp.report(cfg, run_dir)

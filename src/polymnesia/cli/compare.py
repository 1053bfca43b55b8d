"""``polymnesia compare RUN_DIR...``: the headline tables of runs of one protocol side by
side, with intervals (:func:`polymnesia.reports.compare.write_comparison`); or folders that
``lm_eval --output_path DIR --log_samples`` wrote, compared document by document
(:func:`polymnesia.reports.lm_eval_compare.write_lm_eval_comparison`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    cmp = sub.add_parser(
        "compare",
        help="put the headline tables of runs of one protocol side by side, with CIs; or "
        "test lm-eval output folders against each other document by document",
    )
    cmp.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    cmp.add_argument(
        "--out", help="folder for compare.md and compare.html (default runs/compare-HASH)"
    )
    cmp.add_argument("--tables", help="comma-separated table names (default: every shared table)")
    cmp.add_argument(
        "--margin",
        type=float,
        help="lm-eval folders: a non-inferiority margin in the metric's units (e.g. 0.02)",
    )
    cmp.set_defaults(fn=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from polymnesia.experiments.compare_command import compare_folders

    compare_folders(
        [Path(d) for d in args.run_dirs],
        out=args.out,
        tables=args.tables,
        margin=args.margin,
        say=print,
        warn=lambda line: print(line, file=sys.stderr),
    )
    return 0

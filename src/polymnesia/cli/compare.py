"""``polymnesia compare RUN_DIR...``: the headline tables of runs of one protocol side by
side, with intervals (:func:`polymnesia.reports.compare.write_comparison`); or folders that
``lm_eval --output_path DIR --log_samples`` wrote, compared document by document
(:func:`polymnesia.reports.lm_eval_compare.write_lm_eval_comparison`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from polymnesia.errors import PolymnesiaError


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
    from polymnesia.experiments.preflight import check_run_record
    from polymnesia.harness.lm_eval_output import is_lm_eval_folder
    from polymnesia.reports.compare import write_comparison

    dirs = [Path(d) for d in args.run_dirs]
    lm_eval = [is_lm_eval_folder(d) for d in dirs]
    if any(lm_eval) and not all(lm_eval):
        kinds = ", ".join(
            f"{d} is {'lm-eval output' if e else 'a polymnesia run'}"
            for d, e in zip(dirs, lm_eval, strict=True)
        )
        raise PolymnesiaError(
            f"cannot compare lm-eval output with polymnesia runs ({kinds}); pass folders of "
            "one kind"
        )
    if not any(lm_eval):
        for run_dir in dirs:
            if run_dir.is_dir():
                check_run_record(run_dir, "leave it out, or run its config again into a new folder")
        if args.margin is not None:
            raise PolymnesiaError(
                "--margin applies to lm-eval output folders only; these are polymnesia runs"
            )
    elif args.tables:
        raise PolymnesiaError(
            "--tables selects tables of polymnesia runs; lm-eval folders are compared by task"
        )
    tables = [t for t in args.tables.split(",") if t] if args.tables else None
    if args.out is not None:
        out = Path(args.out)
        if out.exists() and not out.is_dir():
            raise PolymnesiaError(
                f"--out {out} is a file; name a folder for compare.md and compare.html"
            )
        try:
            out.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise PolymnesiaError(
                f"cannot write the comparison to {out}: {e.strerror or type(e).__name__}; "
                "pass a writable --out folder"
            ) from None
    if any(lm_eval):
        from polymnesia.reports.lm_eval_compare import write_lm_eval_comparison

        notes: list[str] = []
        md, page, csvs = write_lm_eval_comparison(dirs, args.out, args.margin, notes)
        print(md.read_text(encoding="utf-8"))
        for line in notes:
            print(
                f"[polymnesia] not paired: {line}; only paired documents are compared",
                file=sys.stderr,
            )
        print(f"[polymnesia] comparison: {md}, {page} and {len(csvs)} CSV tables in {md.parent}")
        return 0
    md, page = write_comparison(args.run_dirs, args.out, tables)
    print(md.read_text(encoding="utf-8"))
    print(f"[polymnesia] comparison: {md} and {page}")
    return 0

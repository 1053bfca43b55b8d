"""``polymnesia compare RUN_DIR...``: the headline tables of runs of one protocol side by
side, with intervals (:func:`polymnesia.reports.compare.write_comparison`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from polymnesia.errors import PolymnesiaError


def add_parser(sub: Any) -> None:
    cmp = sub.add_parser(
        "compare", help="put the headline tables of runs of one protocol side by side, with CIs"
    )
    cmp.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    cmp.add_argument(
        "--out", help="folder for compare.md and compare.html (default runs/compare-HASH)"
    )
    cmp.add_argument("--tables", help="comma-separated table names (default: every shared table)")
    cmp.set_defaults(fn=cmd_compare)


def cmd_compare(args: argparse.Namespace) -> int:
    from polymnesia.experiments.preflight import check_run_record
    from polymnesia.reports.compare import write_comparison

    for run_dir in map(Path, args.run_dirs):
        if run_dir.is_dir():
            check_run_record(run_dir, "leave it out, or run its config again into a new folder")
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
    md, page = write_comparison(args.run_dirs, args.out, tables)
    print(md.read_text(encoding="utf-8"))
    print(f"[polymnesia] comparison: {md} and {page}")
    return 0

"""``polymnesia report RUN_DIR``: rebuild the report of a run folder from its saved results.

The work is the library's (:func:`polymnesia.experiments.rebuild.rebuild_report`); this
module parses and prints the report's path."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    rep = sub.add_parser("report", help="rebuild the report of a run folder from its saved results")
    rep.add_argument("run_dir")
    rep.set_defaults(fn=cmd_report)


def cmd_report(args: argparse.Namespace) -> int:
    from polymnesia.experiments.rebuild import rebuild_report

    print(rebuild_report(Path(args.run_dir)))
    return 0

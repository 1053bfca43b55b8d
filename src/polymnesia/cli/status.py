"""``polymnesia status RUN_DIR``: every stage of a run started with ``--executor local`` or
``slurm``: queued, running or done, where (slot or job, node), attempts, time and log file
(:func:`polymnesia.pipeline.executors.describe_status`, from ``RUN_DIR/logs/executor.json``,
which the driver rewrites as stages change)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from polymnesia.errors import PolymnesiaError


def add_parser(sub: Any) -> None:
    st = sub.add_parser(
        "status", help="each stage of a run of --executor local or slurm: state, job, log, time"
    )
    st.add_argument("run_dir", metavar="RUN_DIR")
    st.set_defaults(fn=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    from polymnesia.pipeline.executors import describe_status

    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise PolymnesiaError(f"{run_dir} is not a run folder; pass the RUN_DIR of a run")
    path = run_dir / "logs" / "executor.json"
    if not path.is_file():
        raise PolymnesiaError(
            f"{run_dir} has no logs/executor.json: it was run inline, or not yet; "
            "`polymnesia status` follows runs of --executor local or slurm"
        )
    print(describe_status(path))
    return 0

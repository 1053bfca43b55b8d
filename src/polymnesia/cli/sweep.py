"""``polymnesia sweep CONFIG key=[a,b] key2=[x,y]``: one run per point of the grid (or of the
config's ``grid:`` section), through one executor, then a ``compare`` table of the runs.

The expansion and its checks are :mod:`polymnesia.experiments.sweep`, the run of the points
:mod:`polymnesia.experiments.sweep_run` (this module parses and calls it). Every point is
validated and checked as ``run`` checks a config before anything runs. With ``--executor local`` or
``slurm`` the points' stage graphs are joined into one (a stage several points share is built
once) and handed to the executor, so independent stages of different points run side by
side; with ``inline`` (the default) the points run one after another in this process, each
reusing the stages an earlier point built. Then each point's run folder
(``OUT/KEY=VALUE,...``) and report are written by an inline pass that reuses every entry (so
each is the folder ``polymnesia run CONFIG KEY=VALUE ...`` writes), and ``OUT/compare.md``
puts the runs side by side (:func:`polymnesia.reports.compare.write_comparison`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from polymnesia.cli import run as run_cli
from polymnesia.cli.argtypes import amount


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "sweep", help="run a config over a grid of values (key=[a,b]), then compare the runs"
    )
    s.add_argument("config")
    s.add_argument(
        "overrides",
        nargs="*",
        help="key.path=[a,b] (swept: one run per value, the product over keys) or "
        "key.path=value (fixed in every run)",
    )
    s.add_argument(
        "--out",
        help="the sweep's folder: a run folder per point and compare.md "
        "(default runs/sweep-NAME-HASH)",
    )
    s.add_argument(
        "--dry-run",
        action="store_true",
        help="print the points and the stages to build and reuse, run nothing",
    )
    s.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow models, tokenizers and datasets to run code from their repositories",
    )
    s.add_argument(
        "--lock-timeout",
        type=amount("seconds"),
        default=run_cli._default_lock_timeout(),
        metavar="SECONDS",
        help="how long to wait for a cache entry another run is building",
    )
    s.add_argument(
        "--no-memory-check",
        action="store_true",
        help="run training stages that the memory planner says will not fit this machine",
    )
    s.add_argument(
        "--executor",
        default="inline",
        metavar="NAME",
        help="inline (default: the points one after another in this process), local (the "
        "points' joined stage graph, independent stages side by side, --jobs at a time) or "
        "slurm (as `polymnesia run --executor slurm`)",
    )
    s.add_argument("--jobs", type=int, metavar="N", help="as `polymnesia run --jobs`")
    # a child of --executor local or slurm: build these stages of this point, nothing else
    s.add_argument("--point", type=int, help=argparse.SUPPRESS)
    s.add_argument("--stage", help=argparse.SUPPRESS)
    s.set_defaults(fn=cmd_sweep)


def _child_command(args: argparse.Namespace, merged: Any) -> Any:
    """A child's command line: the joined stages ``stages`` (a chain: a point that has the
    last has them all), built as that point's own stages."""

    def command(stages: list[str]) -> list[str]:
        i, _ = merged.holder(stages[-1])
        own = {m: n for n, m in merged.names[i].items()}
        argv = [sys.executable, "-m", "polymnesia", "sweep", args.config, *args.overrides]
        argv += ["--point", str(i + 1), "--stage", ",".join(own[s] for s in stages)]
        argv += ["--lock-timeout", repr(float(args.lock_timeout))]
        argv += ["--no-memory-check"] if args.no_memory_check else []
        return argv + (["--trust-remote-code"] if args.trust_remote_code else [])

    return command


def cmd_sweep(args: argparse.Namespace) -> int:
    from polymnesia.experiments.sweep_run import run_sweep

    return run_sweep(
        args.config,
        args.overrides,
        out=args.out,
        executor=args.executor,
        jobs=args.jobs,
        dry_run=args.dry_run,
        trust_remote_code=args.trust_remote_code,
        no_memory_check=args.no_memory_check,
        lock_timeout=args.lock_timeout,
        child_command=lambda merged: _child_command(args, merged),
        log=lambda m: print(m, flush=True),
        point=args.point,
        stage=args.stage,
    )

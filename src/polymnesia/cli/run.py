"""``polymnesia run CONFIG``: run an experiment's stages through the cache, then its report.

The checks before anything trains live in :mod:`polymnesia.experiments.preflight` (shared
with ``validate``, ``plan`` and the tests), the run itself in
:mod:`polymnesia.experiments.run_command`; this module parses, calls it and prints.
``--only CATEGORIES`` runs the stages of some stage categories (data, training, evaluation,
analysis, other) and what they need."""

from __future__ import annotations

import argparse
import os
from typing import Any

from polymnesia.cli.argtypes import amount


def build_specs(exp: Any, cfg: Any, source: str) -> list[Any]:
    """:func:`polymnesia.experiments.preflight.build_specs` (imported when first called)."""
    from polymnesia.experiments.preflight import build_specs as build

    return build(exp, cfg, source)


def _default_lock_timeout() -> float:
    try:
        return float(os.environ.get("POLYMNESIA_LOCK_TIMEOUT", 86400))
    except ValueError:
        return 86400.0


def add_parser(sub: Any) -> None:
    r = sub.add_parser("run", help="run an experiment config")
    r.add_argument("config")
    r.add_argument("overrides", nargs="*", help="key.path=value overrides")
    r.add_argument("--run-dir", help="run folder (default runs/NAME-CONFIGHASH)")
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="print the resolved config and the stage plan, run nothing",
    )
    r.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow models, tokenizers and datasets to run code from their repositories "
        "(this run only)",
    )
    r.add_argument(
        "--lock-timeout",
        type=amount("seconds"),
        default=_default_lock_timeout(),
        metavar="SECONDS",
        help="how long to wait for a cache entry another run is building "
        "(default $POLYMNESIA_LOCK_TIMEOUT or 86400)",
    )
    r.add_argument(
        "--only",
        metavar="CATEGORIES",
        help="run only the stages of these stage categories (comma-separated: data, training, "
        "evaluation, analysis, other; `polymnesia ls stages` shows each stage's) and the "
        "stages they need, and write no report; e.g. --only data on a machine with "
        "internet, then `polymnesia cache export` for one without",
    )
    r.add_argument(
        "--no-memory-check",
        action="store_true",
        help="run training stages that the memory planner (`polymnesia plan`) says will not "
        "fit this machine's memory (available RAM on a CPU, the device's memory on a GPU)",
    )
    r.add_argument(
        "--executor",
        default="inline",
        metavar="NAME",
        help="who runs the stages: inline (default: this process, one after another), "
        "local (independent stages side by side as child processes on this machine, "
        "--jobs at a time) or slurm (each group of ready stages a SLURM job, with the "
        "config's cluster: settings, e.g. cluster.partition=gpu; docs/scale.md)",
    )
    r.add_argument(
        "--jobs",
        type=int,
        metavar="N",
        help="with --executor local: at most N stages at once (default: the GPU count, else "
        "2); with --executor slurm: at most N jobs submitted at once (default 256)",
    )
    # a child of --executor local: build this stage (and reuse what it needs), nothing else
    r.add_argument("--stage", help=argparse.SUPPRESS)
    r.set_defaults(fn=cmd_run)


def _child_command(args: argparse.Namespace) -> Any:
    """The command line of a ``--executor local`` child that builds one stage."""
    import sys

    def command(stages: list[str]) -> list[str]:
        argv = [sys.executable, "-m", "polymnesia", "run", args.config, *args.overrides]
        argv += ["--stage", ",".join(stages), "--lock-timeout", repr(float(args.lock_timeout))]
        argv += ["--no-memory-check"] if args.no_memory_check else []
        return argv + (["--trust-remote-code"] if args.trust_remote_code else [])

    return command


def cmd_run(args: argparse.Namespace) -> int:
    from polymnesia.experiments.run_command import run_config

    return run_config(
        args.config,
        args.overrides,
        out=args.run_dir,
        dry_run=args.dry_run,
        trust_remote_code=args.trust_remote_code,
        lock_timeout=args.lock_timeout,
        only=args.only,
        no_memory_check=args.no_memory_check,
        executor=args.executor,
        jobs=args.jobs,
        child_command=_child_command(args),
        log=lambda m: print(m, flush=True),
        stage=args.stage,
    )

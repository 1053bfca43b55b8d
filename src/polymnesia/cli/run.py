"""``polymnesia run CONFIG``: run an experiment's stages through the cache, then its report.

The checks before anything trains live in :mod:`polymnesia.experiments.preflight` (shared
with ``validate``, ``plan`` and the tests); this module parses, calls them in order and
prints. ``--only CATEGORIES`` runs the stages of some stage categories (data, training,
evaluation, analysis, other) and what they need."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from polymnesia.cli.argtypes import amount
from polymnesia.cli.output import run_summary


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
    r.set_defaults(fn=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    import yaml

    from polymnesia.experiments import EXPERIMENTS, load_config
    from polymnesia.experiments.preflight import (
        check_remote_code,
        check_run_dir_place,
        check_run_record,
        check_settings,
        preflight,
    )
    from polymnesia.io import file_lock
    from polymnesia.pipeline.run_dir import check_run_dir, default_run_dir, prepare_run_dir
    from polymnesia.pipeline.runner import (
        describe_plan,
        parse_roles,
        plan,
        run_pipeline,
        select_stages,
    )
    from polymnesia.runtime import partial_state

    categories = parse_roles(args.only) if args.only else None
    cfg = load_config(args.config, args.overrides)
    exp = EXPERIMENTS.get(cfg.experiment)
    specs = build_specs(exp, cfg, args.config)
    n_all, skipped = len(specs), list[str]()
    if categories:
        complete = {p.spec.name for p in plan(specs) if p.status == "reuse"}
        specs, skipped = select_stages(specs, categories, complete)
    check_settings(cfg, specs, args.config)
    check_remote_code(cfg, args.trust_remote_code)
    run_dir = Path(args.run_dir) if args.run_dir else default_run_dir(cfg)
    check_run_dir_place(run_dir)
    check_run_record(run_dir)
    if args.dry_run:
        check_run_dir(run_dir, cfg)  # what the run would refuse, the dry run refuses too
        print(
            yaml.safe_dump(
                cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True
            ).rstrip()
        )
        print(
            f"\n# run folder: {run_dir}\n# stages (reuse = cached, resume = interrupted, run = "
            "new):"
        )
        print(describe_plan(plan(specs)))
        if skipped:
            print(
                "# skipped by --only (they need stages of other categories): " + ", ".join(skipped)
            )
        return 0
    state = partial_state()
    if categories is None or set(categories) - {"data"}:  # `--only data` runs no model
        preflight(cfg, state.device.type, args.config, specs)
    if state.is_main_process:
        from polymnesia.reports.measured import machine_info

        # the machine each run ran on, for its measured-run record (docs/reports.md)
        extra = {"trust_remote_code": bool(args.trust_remote_code), "machine": machine_info()}
        prepare_run_dir(run_dir, cfg, extra=extra)
        if args.trust_remote_code:
            print("[polymnesia] trust_remote_code is ON for this run (recorded in run.json)")
        lock = file_lock(run_dir / ".lock", f"run folder {run_dir}")
        lock.__enter__()
    state.wait_for_everyone()
    started = time.monotonic()
    try:
        run_pipeline(
            specs,
            run_dir,
            log=lambda m: print(m, flush=True),
            lock_timeout=args.lock_timeout,
        )
        if state.is_main_process and categories:
            if skipped:
                print(
                    f"[polymnesia] skipped {len(skipped)} {'/'.join(categories)} stage(s) that "
                    f"need stages of other categories first: {', '.join(skipped)}"
                )
            print(
                f"[polymnesia] ran the {', '.join(categories)} stages and what they need "
                f"({len(specs)} of {n_all}); no report: `polymnesia run` with the same config "
                "runs the rest (reusing these) and writes it"
            )
        elif state.is_main_process:
            report = exp.report(cfg, run_dir)
            print(f"[polymnesia] {run_summary(run_dir, time.monotonic() - started)}")
            print(f"[polymnesia] report: {report}")
    finally:
        if state.is_main_process:
            lock.__exit__(None, None, None)
    return 0

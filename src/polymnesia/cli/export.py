"""``polymnesia export RUN_DIR STAGE DEST [--push-to-hub REPO]``: a model stage's folder out of
the cache with its model card (:func:`polymnesia.experiments.export.export_model`).

A wrong stage, a stage without a model, a destination that is not empty and a push that cannot
happen (offline, ``HF_HUB_OFFLINE=1``) are answered from the run folder before torch loads
(:mod:`polymnesia.pipeline.export`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    ex = sub.add_parser(
        "export", help="copy a stage's model out of the cache with its model card (README.md)"
    )
    ex.add_argument("run_dir", metavar="RUN_DIR")
    ex.add_argument("stage", metavar="STAGE", help="a stage of the run that holds a model")
    ex.add_argument("dest", metavar="DEST", help="a new or empty folder")
    ex.add_argument(
        "--push-to-hub", metavar="REPO", help="then upload DEST to this Hub model repository"
    )
    ex.add_argument("--private", action="store_true", help="with --push-to-hub: a private repo")
    ex.add_argument(
        "--license",
        metavar="ID",
        help="the weights' licence id for the card (default: other, with the data's terms)",
    )
    ex.set_defaults(fn=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    from polymnesia.pipeline.export import check_export, check_push

    run_dir, dest = Path(args.run_dir), Path(args.dest)
    if args.push_to_hub is not None:
        check_push(args.push_to_hub)
    check_export(run_dir, args.stage, dest)  # before torch loads: one line, at once
    from polymnesia.experiments.export import export_model

    done = export_model(
        run_dir,
        args.stage,
        dest,
        license=args.license,
        push_to=args.push_to_hub,
        private=args.private,
    )
    print(f"[polymnesia] exported {args.stage} to {done.dest} ({len(done.files)} files, README.md)")
    if done.url:
        print(f"[polymnesia] pushed to {done.url}")
    return 0

"""``polymnesia cache ls|verify|prune|export|import``: look after the stage cache and move
entries between machines (:func:`polymnesia.pipeline.cache_admin.cache_command`)."""

from __future__ import annotations

import argparse
from typing import Any

from polymnesia.cli.argtypes import amount


def add_parser(sub: Any) -> None:
    c = sub.add_parser(
        "cache", help="list, verify, prune, export or import entries of the stage cache"
    )
    c.add_argument("action", choices=["ls", "verify", "prune", "export", "import"])
    c.add_argument(
        "entries",
        nargs="*",
        help="verify, export: entry folders or KIND/FINGERPRINT (verify's default: all); "
        "import: the archive",
    )
    c.add_argument("--archive", metavar="FILE", help="export: the .tar.gz to write")
    c.add_argument(
        "--run", metavar="RUN_DIR", help="verify, export: the entries this run folder uses"
    )
    c.add_argument(
        "--only",
        metavar="CATEGORIES",
        help="verify --run, export --run: only stages of these stage categories (e.g. data)",
    )
    c.add_argument("--partial", action="store_true", help="prune: also interrupted entries")
    c.add_argument(
        "--unused", action="store_true", help="prune: also entries no existing run folder uses"
    )
    c.add_argument(
        "--older-than",
        type=amount("days"),
        default=0.0,
        metavar="DAYS",
        help="prune: only older entries (a finite number of days >= 0)",
    )
    c.add_argument("--dry-run", action="store_true", help="prune: say what would be removed")
    c.add_argument(
        "--full", action="store_true", help="prune: hash every file to find damage (slow)"
    )
    c.set_defaults(fn=cmd_cache)


def cmd_cache(args: argparse.Namespace) -> int:
    from polymnesia.pipeline.cache_admin import cache_command

    return cache_command(
        args.action,
        args.entries,
        archive=args.archive,
        run=args.run,
        only=args.only,
        partial=args.partial,
        unused=args.unused,
        older_than_days=args.older_than,
        dry_run=args.dry_run,
        full=args.full,
        log=print,
    )

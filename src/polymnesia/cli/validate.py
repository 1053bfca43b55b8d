"""``polymnesia validate CONFIG...``: check configs without running anything
(:func:`polymnesia.experiments.preflight.check_config`)."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    v = sub.add_parser("validate", help="check configs without running anything")
    v.add_argument("configs", nargs="+")
    v.add_argument("--set", action="append", help="key.path=value override applied to every config")
    v.set_defaults(fn=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    from polymnesia.experiments.preflight import check_config

    for path in args.configs:
        cfg, specs = check_config(path, args.set or [])
        print(f"ok  {path}  ({cfg.experiment}, {len(specs)} stages)")
    return 0

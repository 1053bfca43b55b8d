"""``polymnesia init DIR``: copy the shipped configs into a folder, to edit and run."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from polymnesia.shipped import copy_out


def add_parser(sub: Any) -> None:
    i = sub.add_parser(
        "init",
        help="copy the shipped configs into a new folder (quickstart.yaml, two_phase.yaml, ...)",
    )
    i.add_argument("dir", help="a folder that does not exist yet, or an empty one")
    i.set_defaults(fn=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    dest = Path(args.dir)
    written = copy_out(dest)
    print(
        f"{len(written)} configs in {dest}/; run one with `polymnesia run "
        f"{dest / 'quickstart.yaml'}`"
    )
    return 0

"""``polymnesia validate CONFIG...``: check configs without running anything
(:func:`polymnesia.experiments.preflight.check_config`).

Every config is read first (:func:`~polymnesia.experiments.loading.load_config`: the file, its
keys and values, its data files), which loads neither torch nor transformers, so a typo or a
missing file is answered in about a second; the stages, and with them torch, are imported
only once every config reads."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    v = sub.add_parser("validate", help="check configs without running anything")
    v.add_argument("configs", nargs="+")
    v.add_argument("--set", action="append", help="key.path=value override applied to every config")
    v.set_defaults(fn=cmd_validate)


def cmd_validate(args: argparse.Namespace) -> int:
    from polymnesia.experiments.loading import load_config

    configs = [(path, load_config(path, args.set or [])) for path in args.configs]
    from polymnesia.experiments.preflight import check_loaded

    for path, cfg in configs:
        specs = check_loaded(cfg, path)
        print(f"ok  {path}  ({cfg.experiment}, {len(specs)} stages)")
    return 0

"""``polymnesia data fetch|info SOURCE [key=value ...]``: fetch a corpus into the cache, or
describe it (one row per language)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from polymnesia.errors import PolymnesiaError


def add_parser(sub: Any) -> None:
    d = sub.add_parser("data", help="fetch a corpus into the cache or describe it")
    d.add_argument("action", choices=["fetch", "info"])
    d.add_argument("source")
    d.add_argument("options", nargs="*", help="source options as key=value")
    d.add_argument("--json", action="store_true", help="print info as JSON")
    d.set_defaults(fn=cmd_data)


def _parse_options(items: list[str]) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise PolymnesiaError(f"source option '{item}' must look like key=value")
        k, v = item.split("=", 1)
        out[k] = yaml.safe_load(v)
    return out


def cmd_data(args: argparse.Namespace) -> int:
    from polymnesia.data.catalog import describe_source, fetch_source

    options = _parse_options(args.options)
    if args.action == "fetch":
        print(fetch_source(args.source, **options))
    elif args.json:
        print(json.dumps(describe_source(args.source, **options), indent=2, ensure_ascii=False))
    else:
        print(format_source_info(describe_source(args.source, **options)))
    return 0


def format_source_info(info: dict[str, Any]) -> str:
    """A readable summary of ``describe_source``: one row per language."""
    from polymnesia.data.languages import get_language

    lines = [f"source: {info.get('name')}", f"licence: {info.get('licence', '')}"]
    if "fractions" in info:
        lines.append(
            f"splits: train/validation/test = {info['fractions']} by aligned id (seed "
            f"{info.get('seed')})"
        )
    lines.append(
        f"{'lang':6s}{'language':22s}{'script':12s}{'records':>9s}{'train':>8s}{'valid':>8s}{'test':>8s}"
    )
    for lang, row in info.get("per_language", {}).items():
        try:
            meta = get_language(lang)
            name, script = meta.name, meta.script
        except PolymnesiaError:
            name, script = "?", "?"
        sp = row.get("splits", {})
        lines.append(
            f"{lang:6s}{name[:21]:22s}{script[:11]:12s}{row.get('records', 0):9d}"
            f"{sp.get('train', 0):8d}{sp.get('validation', 0):8d}{sp.get('test', 0):8d}"
        )
    return "\n".join(lines)

"""What the report says about each language order: the languages, and how the order was made."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from polymnesia.continual.config import OrderConfig
from polymnesia.continual.methods import get_method
from polymnesia.experiments.lifelong.config import LifelongConfig
from polymnesia.results import Score, filter_scores

READINGS = {
    "literal": "eq. 9 as written, the new language counted in P_t+1",
    "previous": "section 3.3.1's prose, only the languages learned before",
}


def order_info(scores: Sequence[Score]) -> dict[str, dict[str, Any]]:
    """``{order name: extra}`` of the ``order_position`` records (kind, procedure, reading,
    count).
    """
    return {str(s.setting): dict(s.extra) for s in filter_scores(scores, metric="order_position")}


def how_made(o: OrderConfig, info: Mapping[str, Any]) -> str:
    """One phrase saying how an order was made (for destructive_last: procedure, reading, count)."""
    if o.kind == "resource":
        return f"resource order ({o.resource_by})"
    if o.kind == "shuffle":
        return f"seeded shuffle (seed {o.seed})"
    if o.kind == "explicit":
        return "as listed in the config"
    method = get_method(o.source_method).label
    shift = info.get("shift", o.shift)
    reading = f"P_avg read '{shift}' ({READINGS.get(str(shift), shift)})"
    where = f"measured by {method} in orders {', '.join(o.sources)}"
    if info.get("destructive", o.destructive) == "sort":
        return (
            f"most destructive last, procedure 'sort': every language sorted by {reading}, {where}"
        )
    count = info.get("count", o.destructive_count)
    return (
        "most destructive last, procedure 'move_to_end' (the paper's appendix A.1): a shuffle "
        f"(seed {o.seed}), then the {count} language(s) with the largest {reading} moved to the "
        f"end, {where}"
    )


def order_lines(
    cfg: LifelongConfig, scores: Sequence[Score], orders: Mapping[str, list[str]]
) -> list[str]:
    """One bullet per order: name, how it was made, the languages in learning order."""
    info = order_info(scores)
    by_name = {o.name: o for o in cfg.orders}
    lines = []
    for name, langs in orders.items():
        o = by_name.get(name)
        made = how_made(o, info.get(name, {})) if o is not None else "order"
        lines.append(f"{name} ({made}): {' → '.join(langs)}")
    return lines

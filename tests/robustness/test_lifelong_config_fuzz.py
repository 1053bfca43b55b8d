"""Protocol-level nonsense in the lifelong configs is refused in one line (issue 9).

Table-driven on top of the fuzzer's helpers: every list of every lifelong
config emptied, every seed made negative, every task-language code made
unknown, every task language listed twice, the task name emptied. The generic
fuzzer (test_config_fuzz.py) samples mutations at random; this walks all of
these deterministically.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzz_configs import CONFIGS, Mutation, _dump, _leaves, _set, run_one

from polymnesia.config.loader import parse_yaml

LIFELONG = sorted(CONFIGS.glob("lifelong*.yaml"))


def _is_task_code(parts: list[str]) -> bool:
    """The first code of ``languages`` or of an explicit order (one per list keeps the table
    short).
    """
    return (parts[:1] == ["languages"] and parts[1:] == ["0"]) or (
        len(parts) == 4 and parts[0] == "orders" and parts[2:] == ["languages", "0"]
    )


def _cases() -> Iterator[tuple[Mutation, str]]:
    for path in LIFELONG:
        data = parse_yaml(path.read_text(encoding="utf-8"))
        for parts, value in _leaves(data, []):
            key = ".".join(parts)
            if parts and isinstance(value, list) and value:
                yield (
                    Mutation(path.name, "empty_list", key, "refuse", _dump(_set(data, parts, []))),
                    "",
                )
            if parts and parts[-1] == "seed":
                yield (
                    Mutation(path.name, "negative", key, "refuse", _dump(_set(data, parts, -1))),
                    "seed",
                )
            if _is_task_code(parts):
                yield (
                    Mutation(path.name, "text", key, "refuse", _dump(_set(data, parts, "qq"))),
                    "qq",
                )
        langs: list[Any] = data["languages"]
        twice = _dump({**data, "languages": [*langs, langs[0]]})
        yield Mutation(path.name, "duplicate", "languages", "refuse", twice), "twice"
        yield (
            Mutation(
                path.name,
                "empty_string",
                "task.name",
                "refuse",
                _dump(_set(data, ["task", "name"], "")),
            ),
            "task.name",
        )


CASES = list(_cases())


def test_the_table_covers_every_lifelong_config() -> None:
    assert {m.config for m, _ in CASES} == {p.name for p in LIFELONG}
    kinds = {(m.config, m.kind) for m, _ in CASES}
    assert all((p.name, "empty_list") in kinds for p in LIFELONG)


@pytest.mark.parametrize(
    ("mutation", "needle"), CASES, ids=[f"{m.config}:{m.kind}:{m.path}" for m, _ in CASES]
)
def test_lifelong_nonsense_is_refused_in_one_line(
    mutation: Mutation, needle: str, tmp_path: Path
) -> None:
    out = run_one(mutation, tmp_path, dry_run=False)
    assert out.result == "refused", out.detail
    assert needle in out.detail

"""A seeded fuzzer of the configs in configs/: mutate, validate through the CLI, classify.

Each mutation of a shipped config goes through ``polymnesia validate`` or
``polymnesia run --dry-run`` in-process. The outcome is

- ``refused``: exit 2 with one ``polymnesia: error:`` line;
- ``accepted``: exit 0;
- ``traceback``: any other exception (or a multi-line error).

Every mutation carries an *expectation*: ``refuse`` for the generic classes
that validation must catch whatever the protocol (non-finite numbers,
booleans for numbers, text for numbers, unknown keys of typed sections and of
a data source's options, duplicate keys, non-UTF-8 files, unsafe names, split
fractions that leave a split empty), ``accept`` for values that are valid
(``mixed_precision: no``), or ``any`` where whether it makes sense depends on
the protocol (empty lists, negative numbers, upper-case language codes, ...):
those accepted are listed for review, not failed.

Run it as a script to see everything it finds:
``python tests/robustness/fuzz_configs.py [SEED] [PER_CONFIG]``.
"""

from __future__ import annotations

import contextlib
import io
import random
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


@dataclass
class Mutation:
    config: str
    kind: str
    path: str  # dotted key path ("" for file-level mutations)
    expect: str  # "refuse" | "accept" | "any"
    text: bytes  # the mutated file


@dataclass
class Outcome:
    mutation: Mutation
    result: str  # "refused" | "accepted" | "traceback"
    detail: str


# -- where in the typed config a key path lands ---------------------------------------------


def _unwrap(ann: Any) -> list[Any]:
    if typing.get_origin(ann) is typing.Annotated:
        return _unwrap(typing.get_args(ann)[0])
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        return [a for arg in typing.get_args(ann) for a in _unwrap(arg) if a is not type(None)]
    return [ann]


def annotation_at(model: type[BaseModel], parts: list[str]) -> Any:
    """The type annotation the key path ``parts`` lands on (None if unknown/free-form)."""
    current: Any = model
    for part in parts:
        options = _unwrap(current)
        models = [o for o in options if isinstance(o, type) and issubclass(o, BaseModel)]
        if models:
            fields = models[0].model_fields
            if part not in fields:
                return None
            current = fields[part].annotation
            continue
        origin = typing.get_origin(options[0]) if len(options) == 1 else None
        args = typing.get_args(options[0]) if len(options) == 1 else ()
        if origin in (list, tuple) and part.isdigit() and args:
            current = (
                args[0]
                if origin is list or args[-1] is Ellipsis
                else args[min(int(part), len(args) - 1)]
            )
        elif origin is dict and len(args) == 2:
            current = args[1]
        else:
            return None
        if current is Any:
            return None
    return current


def _is_number(ann: Any) -> bool:
    opts = _unwrap(ann) if ann is not None else []
    return bool(opts) and all(o in (int, float) for o in opts)


def _is_model(ann: Any) -> bool:
    return any(isinstance(o, type) and issubclass(o, BaseModel) for o in _unwrap(ann or int))


# -- mutations ------------------------------------------------------------------------------


def _leaves(node: Any, prefix: list[str]) -> Iterator[tuple[list[str], Any]]:
    yield prefix, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _leaves(v, [*prefix, str(k)])
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _leaves(v, [*prefix, str(i)])


def _dump(data: Any) -> bytes:
    import yaml

    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True).encode("utf-8")


def _set(data: Any, parts: list[str], value: Any) -> Any:
    import copy

    out = copy.deepcopy(data)
    node = out
    for p in parts[:-1]:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if isinstance(node, list):
        node[int(parts[-1])] = value
    else:
        node[parts[-1]] = value
    return out


VALUE_MUTATIONS: list[tuple[str, Any]] = [
    ("inf", float("inf")),
    ("-inf", float("-inf")),
    ("nan", float("nan")),
    ("true", True),
    ("false", False),
    ("text", "xx"),
    ("empty_string", ""),
    ("null", None),
    ("negative", -1),
    ("zero", 0),
    ("huge", 10**12),
    ("empty_list", []),
    ("mapping", {"a": 1}),
]


def _expect_value(kind: str, ann: Any, parts: list[str]) -> str:
    if kind in ("inf", "-inf", "nan"):
        return "refuse"  # non-finite numbers are refused anywhere
    if kind in ("true", "false", "text", "mapping") and _is_number(ann):
        return "refuse"
    if kind in ("empty_string", "text") and parts == ["name"]:
        return "refuse" if kind == "empty_string" else "any"
    return "any"


def value_mutations(
    config: str, data: dict[str, Any], model: type[BaseModel], rng: random.Random, n: int
) -> Iterator[Mutation]:
    leaves = [(p, v) for p, v in _leaves(data, []) if p]
    for _ in range(n):
        parts, old = rng.choice(leaves)
        kind, value = rng.choice(VALUE_MUTATIONS)
        if kind == "empty_list" and not isinstance(old, list):
            kind, value = "upper", old.upper() if isinstance(old, str) else old
        if kind == "upper" and not isinstance(old, str):
            continue
        ann = annotation_at(model, parts)
        expect = _expect_value(kind, ann, parts)
        yield Mutation(config, kind, ".".join(parts), expect, _dump(_set(data, parts, value)))


def structural_mutations(
    config: str, text: bytes, data: dict[str, Any], model: type[BaseModel], rng: random.Random
) -> Iterator[Mutation]:
    import re

    lines = text.decode("utf-8").splitlines(keepends=True)
    # a key repeated in its own mapping
    keyed = [i for i, line in enumerate(lines) if re.match(r"^\s*[A-Za-z_][\w]*:", line)]
    i = rng.choice(keyed)
    dup = "".join(lines[: i + 1] + [lines[i].split(":")[0] + ": null\n"] + lines[i + 1 :])
    if not lines[i].rstrip().endswith(":"):  # not a block opener (its children would follow)
        yield Mutation(
            config, "duplicate_key", lines[i].split(":")[0].strip(), "refuse", dup.encode()
        )
    pos = rng.randrange(len(text))
    yield Mutation(config, "non_utf8", "", "refuse", text[:pos] + b"\xff\xfe" + text[pos:])
    yield Mutation(config, "truncated", "", "any", text[: rng.randrange(1, len(text))])
    yield Mutation(config, "binary", "", "refuse", bytes(rng.randrange(256) for _ in range(64)))
    # an unknown key in a typed section
    sections = [
        p
        for p, v in _leaves(data, [])
        if isinstance(v, dict) and _is_model(annotation_at(model, p) if p else model)
    ]
    parts = rng.choice(sections)
    node = _set(data, [*parts, "bogus_key"], 1) if parts else {**data, "bogus_key": 1}
    yield Mutation(config, "unknown_key", ".".join([*parts, "bogus_key"]), "refuse", _dump(node))
    for name in ("../../x", "/tmp/x", "a/b", ""):
        yield Mutation(config, "unsafe_name", "name", "refuse", _dump({**data, "name": name}))
    for path, section in [
        (p, v) for p, v in _leaves(data, []) if p and p[-1] == "data" and isinstance(v, dict)
    ]:
        yield Mutation(
            config,
            "source_option",
            ".".join([*path, "options", "bogus"]),
            "refuse",
            _dump(_set(data, [*path, "options"], {**section.get("options", {}), "bogus": 1})),
        )
        for bad in ([1, 0, 0], [0.5, 0.5, 0], [0.0, 0.5, 0.5], [0.7, 0.2, 0.2]):
            yield Mutation(
                config,
                "split_fractions",
                ".".join([*path, "split_fractions"]),
                "refuse",
                _dump(_set(data, [*path, "split_fractions"], bad)),
            )
    for path, _ in [(p, v) for p, v in _leaves(data, []) if p and isinstance(v, list) and v]:
        yield Mutation(config, "empty_list", ".".join(path), "any", _dump(_set(data, path, [])))
    for path, _ in [(p, v) for p, v in _leaves(data, []) if p and p[-1] == "mixed_precision"]:
        raw = text.decode().replace("mixed_precision: ", "mixed_precision: no #", 1)
        yield Mutation(config, "mixed_precision_no", ".".join(path), "accept", raw.encode())


#: configs whose evaluation names lm-eval tasks on the Hub (refused offline in one line, see
#: tests/core/test_shipped_configs.py): the fuzzer swaps in offline tasks, so that every other
#: key of theirs is exercised offline
OFFLINE_TASKS: dict[str, dict[str, list[str]]] = {
    # its data prepares English only (an offline task in another language is refused)
    "two_phase_paper.yaml": {"english": ["poly_genre_en"], "multilingual": ["poly_genre_en"]},
}


def mutations(seed: int = 0, per_config: int = 30) -> Iterator[Mutation]:
    from polymnesia.config.loader import parse_yaml
    from polymnesia.experiments import EXPERIMENTS

    rng = random.Random(seed)
    for path in sorted(CONFIGS.glob("*.yaml")):
        text = path.read_bytes()
        data = parse_yaml(text.decode("utf-8"))
        if path.name in OFFLINE_TASKS:
            data["evaluation"].update(OFFLINE_TASKS[path.name])
            text = _dump(data)
        model = EXPERIMENTS.get(data["experiment"]).Config
        yield from structural_mutations(path.name, text, data, model, rng)
        yield from value_mutations(path.name, data, model, rng, per_config)


# -- running --------------------------------------------------------------------------------


def run_one(m: Mutation, folder: Path, dry_run: bool) -> Outcome:
    from polymnesia.cli.main import main

    path = folder / m.config
    path.write_bytes(m.text)
    argv = ["run", str(path), "--dry-run"] if dry_run else ["validate", str(path)]
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except Exception as e:  # noqa: BLE001 - every escaping exception is a finding
        return Outcome(
            m, "traceback", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        )
    message = err.getvalue().strip()
    if code == 0:
        return Outcome(m, "accepted", "")
    if code == 2 and message.startswith("polymnesia: error:") and len(message.splitlines()) == 1:
        return Outcome(m, "refused", message)
    return Outcome(m, "traceback", f"exit {code}: {message[:300]}")


def fuzz(folder: Path, seed: int = 0, per_config: int = 30) -> list[Outcome]:
    import polymnesia.stages  # noqa: F401

    return [
        run_one(m, folder, dry_run=i % 4 == 3) for i, m in enumerate(mutations(seed, per_config))
    ]


if __name__ == "__main__":
    import tempfile

    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    per = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    with tempfile.TemporaryDirectory() as tmp:
        results = fuzz(Path(tmp), seed, per)
    for o in results:
        m = o.mutation
        flag = "" if o.result != "accepted" or m.expect != "any" else "  <- review"
        if o.result == "traceback" or (m.expect == "refuse" and o.result != "refused") or flag:
            print(f"{o.result:9s} {m.config:28s} {m.kind:16s} {m.path:40s} {o.detail[:150]}{flag}")
    print(
        f"{len(results)} mutations: "
        + ", ".join(
            f"{k} {sum(o.result == k for o in results)}"
            for k in ("refused", "accepted", "traceback")
        )
    )

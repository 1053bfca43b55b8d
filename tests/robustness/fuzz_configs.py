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

Besides edits of the file, :func:`cli_mutations` calls the command line as users do
(issue 30): values given as ``--set`` or ``run`` overrides, an anchor bomb and deep
nesting, seeds and floats out of range, a name too long in bytes, a ``--run-dir`` under
``/proc``, damaged run folders (``run.json`` of ``[]``, ``null``, not UTF-8), a key given
twice at the top level, a LoRA rank above the model width, a token task on label-only
data, unknown ``fields`` roles, a freezing pattern that matches no weight, an lm-eval
task in a language the data lacks, and long integers (issue 45: 4,400 digits in the file
or an override, counts of 10**30). :func:`command_cases` adds what needs more than a
config: ``report`` and ``compare`` on damaged run folders and on duplicated or missing score
records (issue 45), ``plan`` with absurd ``--memory`` and ``--devices``, ``cache import`` of
hostile archives, and a tiny run on a full disk (``ENOSPC`` simulated at the k-th write).

Run it as a script to see everything it finds and the counts (mutations, tracebacks,
silently wrong: a mutation that must be refused but was accepted, or the reverse):
``python tests/robustness/fuzz_configs.py [SEED] [PER_CONFIG] [--commands]``.
"""

from __future__ import annotations

import contextlib
import io
import random
import re
import sys
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
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
    #: more of the command line: overrides (``key=value``), ``--run-dir DIR``
    args: list[str] = field(default_factory=list)
    #: "validate" or "dry-run" to force the command; None: as ``run_one`` is told
    command: str | None = None
    #: a run folder to make for ``--run-dir {run_dir}`` with this ``run.json``
    run_json: bytes | None = None


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


# -- the command line as users call it (issue 30) --------------------------------------------

#: an anchor bomb: ten aliases of ten aliases, nine levels deep (10**10 values expanded)
BOMB = "\n".join(
    ["bomb0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    + [f"bomb{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 10)]
)
#: the file systems of the kernel, which hold no run folder
PSEUDO_RUN_DIRS = ("/proc/polymnesia-fuzz", "/sys/polymnesia-fuzz", "/dev/polymnesia-fuzz")
DAMAGED_RUN_JSON = (b"[]", b"null", b"\xff\xfe{}", b"{", b'{"stages": []}')


def _flow(value: Any) -> str:
    """``value`` as a one-line YAML value for a ``key=value`` override."""
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10**6)
    return text.strip().removesuffix("...").strip()


def _data_languages(data: dict[str, Any]) -> set[str]:
    """The languages the data stages of a (valid) config prepare; empty when it cannot tell."""
    from polymnesia.experiments import EXPERIMENTS
    from polymnesia.experiments.loading import resolve_config

    try:
        cfg = resolve_config(data)
        specs = EXPERIMENTS.get(cfg.experiment).build(cfg)
    except Exception:  # noqa: BLE001 - a config the fuzzer cannot build: no language mutation
        return set()
    return {lang for s in specs if s.kind == "prepare_data" for lang in s.params.languages}


def _known_models(data: dict[str, Any]) -> bool:
    """Whether every model of a config is a preset (known without a download)."""
    return "name_or_path" not in str(data) and not data.get("instruct_model")


def cli_mutations(
    config: str, text: bytes, data: dict[str, Any], model: type[BaseModel], rng: random.Random
) -> Iterator[Mutation]:
    """The classes of issue 30 items 5-7, and values given on the command line."""
    from polymnesia.harness.tasks import HARNESS_TASKS

    def file(kind: str, path: str, expect: str, new: Any, **kw: Any) -> Mutation:
        return Mutation(
            config, kind, path, expect, new if isinstance(new, bytes) else _dump(new), **kw
        )

    def override(kind: str, path: str, expect: str, value: Any, **kw: Any) -> Mutation:
        return Mutation(config, kind, path, expect, text, [f"{path}={_flow(value)}"], **kw)

    # 5: YAML bounded before it is expanded
    yield file("yaml_bomb", "", "refuse", text + b"\n" + BOMB.encode() + b"\n")
    yield file("deep_nesting", "", "refuse", text + b"\ndeep: " + b"[" * 300 + b"]" * 300 + b"\n")
    deep = f"deep={'[' * 300}{']' * 300}"
    yield Mutation(config, "deep_nesting", "deep", "refuse", text, [deep])
    # 6: seeds and floats out of range, as users type them
    for value in (-1, 2**40):
        yield override("seed_range", "seed", "refuse", value, command="dry-run")
    leaves = [(p, v) for p, v in _leaves(data, []) if p]
    for parts, old in leaves:
        last = parts[-1]
        if last in ("seed", "seeds") or last.endswith("_seed"):
            bad = [0, -1] if isinstance(old, list) else -1
            yield file("seed_range", ".".join(parts), "refuse", _set(data, parts, bad))
    floats = [p for p, v in leaves if isinstance(v, float) and annotation_at(model, p) is float]
    for parts in rng.sample(floats, min(2, len(floats))):
        dotted = ".".join(parts)
        if any(x.isdigit() for x in parts):
            yield file("float_overflow", dotted, "refuse", _set(data, parts, 1e39))
        else:
            yield override("float_overflow", dotted, "refuse", 1e39)
    # 7: refused by validate and --dry-run, not late
    yield file("long_name", "name", "refuse", {**data, "name": "\N{GRINNING FACE}" * 70})
    yield file(
        "long_name", "name", "accept", {**data, "name": "\N{CJK UNIFIED IDEOGRAPH-540D}" * 60}
    )
    for run_dir in PSEUDO_RUN_DIRS:
        yield Mutation(
            config, "pseudo_run_dir", "", "refuse", text, ["--run-dir", run_dir], "dry-run"
        )
    for content in DAMAGED_RUN_JSON:
        args = ["--run-dir", "{run_dir}"]
        yield Mutation(config, "damaged_run_json", "", "refuse", text, args, "dry-run", content)
    yield file("duplicate_top_key", "name", "refuse", text + b"\nname: again\n")
    if "data" in data:
        yield file("duplicate_top_key", "data", "refuse", text + b"\ndata:\n  source: udhr\n")
    known = _known_models(data)
    for parts, old in leaves:
        if parts[-1] == "lora_rank" or (parts[-1] == "ranks" and isinstance(old, list)):
            bad = [100000] if parts[-1] == "ranks" else 100000
            # two_phase's mitigated pair may start from instruct_model (a Hub id: unknown here)
            yield file(
                "lora_rank", ".".join(parts), "refuse" if known else "any", _set(data, parts, bad)
            )
        if parts[-1] == "freezing" and isinstance(old, list):
            for i in range(len(old)):
                bad = _set(data, [*parts, str(i), "pattern"], "no_such_module_xyz")
                path = ".".join([*parts, str(i), "pattern"])
                yield file("freezing_pattern", path, "refuse" if known else "any", bad)
        if parts[-1] == "sets" and isinstance(old, dict):
            for name in old:
                bad = _set(data, [*parts, name, "fields"], {"bogus_role": "x"})
                yield file("unknown_fields", ".".join([*parts, name, "fields"]), "refuse", bad)
    if data.get("experiment") == "active_forgetting":
        yield override("unknown_fields", "instruct.fields", "refuse", {"bogus_role": "x"})
        yield override("lora_rank", "instruct.lora_rank", "refuse" if known else "any", 100000)
    label_only = (data.get("data") or {}).get("source", "bible") in ("bible", "udhr")
    if isinstance(data.get("task"), dict) and "tasks" not in data:
        task = data["task"]
        # lifelong builds a token task from label-only text with task_pivot or slot_field
        built = data.get("task_pivot") or data.get("slot_field")
        expect = "refuse" if label_only and not task.get("data") and not built else "any"
        yield file("token_task", "task.kind", expect, _set(data, ["task", "kind"], "token"))
    harness = (data.get("evaluate") or {}).get("harness")
    if isinstance(harness, dict) and "multilingual" in harness:
        langs = _data_languages(data)
        absent = [e.name for e in HARNESS_TASKS if e.obj.lang not in langs]
        if langs and absent:
            bad = _set(data, ["evaluate", "harness", "multilingual"], [absent[0]])
            yield file("harness_language", "evaluate.harness.multilingual", "refuse", bad)
    # issue 45: long integers (beyond Python's 4,300-digit limit of int()) and counts far
    # beyond what any run trains, in the file and as overrides
    yield from long_integers(config, text, data, model, rng)
    # values given on the command line rather than in the file
    plain = [(p, v) for p, v in leaves if p != ["experiment"] and not any(x.isdigit() for x in p)]
    for _ in range(6):
        parts, old = rng.choice(plain)
        kind, value = rng.choice(VALUE_MUTATIONS)
        if kind == "empty_list":
            continue
        expect = _expect_value(kind, annotation_at(model, parts), parts)
        yield override(
            kind, ".".join(parts), expect, value, command=rng.choice(["validate", "dry-run"])
        )


#: an integer of more digits than Python reads (``sys.get_int_max_str_digits()``: 4,300)
LONG_DIGITS = "1" * 4400
#: a count far beyond any run (a slip of the keyboard): every integer setting refuses it
HUGE_COUNT = 10**30


def _int_leaves(data: dict[str, Any], model: type[BaseModel]) -> list[list[str]]:
    """Key paths of ``data`` whose value is an integer where the config takes only integers
    (seeds left out: :func:`cli_mutations` has their own class)."""
    out = []
    for parts, value in _leaves(data, []):
        if not parts or isinstance(value, bool) or not isinstance(value, int):
            continue
        if any(p in ("seed", "seeds") or p.endswith("_seed") for p in parts):
            continue
        if _unwrap(annotation_at(model, parts)) == [int]:
            out.append(parts)
    return out


def long_integers(
    config: str, text: bytes, data: dict[str, Any], model: type[BaseModel], rng: random.Random
) -> Iterator[Mutation]:
    """The "long integers" class (issue 45 items 4 and 6): an integer of 4,400 digits in the
    file (its YAML text, which PyYAML would read with ``int()``) and as an override, and a
    count of 10**30 for integer settings; each must be refused in one line (the digits by the
    YAML loader, a count by its field's range or the 64-bit bound)."""
    raw = text.decode("utf-8")
    top_int = next(
        (k for k, v in data.items() if isinstance(v, int) and not isinstance(v, bool)), None
    )
    key = top_int or "seed"
    lines = [ln for ln in raw.splitlines() if not ln.startswith(f"{key}:")]
    long_file = "\n".join([*lines, f"{key}: {LONG_DIGITS}", ""]).encode()
    yield Mutation(config, "long_integer", key, "refuse", long_file)
    yield Mutation(config, "long_integer", "seed", "refuse", text, [f"seed={LONG_DIGITS}"])
    yield Mutation(
        config, "long_integer", "x.y", "refuse", text, [f"x.y=-{LONG_DIGITS}"], "dry-run"
    )
    ints = _int_leaves(data, model)
    for parts in rng.sample(ints, min(3, len(ints))):
        dotted = ".".join(parts)
        if any(x.isdigit() for x in parts):
            yield Mutation(
                config, "huge_count", dotted, "refuse", _dump(_set(data, parts, HUGE_COUNT))
            )
        else:
            command = rng.choice(["validate", "dry-run"])
            args = [f"{dotted}={HUGE_COUNT}"]
            yield Mutation(config, "huge_count", dotted, "refuse", text, args, command)


def mutations(seed: int = 0, per_config: int = 30) -> Iterator[Mutation]:
    from polymnesia.config.loader import parse_yaml
    from polymnesia.experiments import EXPERIMENTS

    rng = random.Random(seed)
    for path in sorted(CONFIGS.glob("*.yaml")):
        text = path.read_bytes()
        data = parse_yaml(text.decode("utf-8"))
        if path.name in OFFLINE_TASKS:
            data["evaluate"]["harness"].update(OFFLINE_TASKS[path.name])
            text = _dump(data)
        model = EXPERIMENTS.get(data["experiment"]).Config
        yield from structural_mutations(path.name, text, data, model, rng)
        yield from value_mutations(path.name, data, model, rng, per_config)
        yield from cli_mutations(path.name, text, data, model, rng)


# -- running --------------------------------------------------------------------------------


def run_one(m: Mutation, folder: Path, dry_run: bool) -> Outcome:
    path = folder / m.config
    path.write_bytes(m.text)
    if m.command is not None:
        dry_run = m.command == "dry-run"
    args = list(m.args)
    if m.run_json is not None:
        run_dir = folder / "damaged-run"
        run_dir.mkdir(exist_ok=True)
        (run_dir / "run.json").write_bytes(m.run_json)
        args = [a.replace("{run_dir}", str(run_dir)) for a in args]
    if dry_run:
        argv = ["run", str(path), "--dry-run", *args]
    else:  # validate takes overrides as --set KEY=VALUE
        argv = ["validate", str(path), *(x for a in args for x in ("--set", a))]
    return call(m, argv)


def call(m: Mutation, argv: list[str]) -> Outcome:
    """``polymnesia ARGV`` in this process, classified."""
    from polymnesia.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as e:  # argparse refuses an argument: usage, then one line
                lines = err.getvalue().strip().splitlines()
                if e.code == 2 and lines and lines[-1].startswith("polymnesia"):
                    return Outcome(m, "refused", lines[-1])
                raise
    except Exception as e:  # noqa: BLE001 - every escaping exception is a finding
        return Outcome(
            m, "traceback", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        )
    lines = err.getvalue().strip().splitlines()
    errors = [line for line in lines if line.startswith("polymnesia: error:")]
    if code == 0:
        return Outcome(m, "accepted", "")
    # warning lines of stages that ran may come first; the error is one line, the last
    if code == 2 and errors == lines[-1:] and not any("Traceback" in x for x in lines):
        return Outcome(m, "refused", errors[0])
    return Outcome(m, "traceback", f"exit {code}: {' | '.join(lines)[:300]}")


# -- commands beyond validate and the dry run ------------------------------------------------


@contextlib.contextmanager
def full_disk_after(k: int) -> Iterator[list[int]]:
    """Every file opened for writing after the first ``k`` fails with ``ENOSPC``, as on a full
    disk (``open``, ``Path.write_*``, ``os.fdopen`` of the atomic writes); yields the count."""
    import builtins
    import errno

    real = io.open
    count = [0]

    def opener(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if any(c in mode for c in "wax+"):
            count[0] += 1
            if count[0] > k:
                raise OSError(errno.ENOSPC, "No space left on device", str(file))
        return real(file, mode, *args, **kwargs)

    builtins.open = io.open = opener  # type: ignore[assignment]
    try:
        yield count
    finally:
        builtins.open = io.open = real  # type: ignore[assignment]


def _hostile_archives(folder: Path) -> dict[str, Path]:
    import tarfile

    def tar(name: str, members: list[tuple[str, bytes, bytes]]) -> Path:
        path = folder / f"{name}.tar.gz"
        with tarfile.open(path, "w:gz") as t:
            for member, kind, data in members:
                info = tarfile.TarInfo(member)
                info.type, info.size = kind, len(data)
                if kind == tarfile.SYMTYPE:
                    info.linkname, info.size = "/etc/passwd", 0
                t.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)
        return path

    (folder / "empty.tar.gz").write_bytes(b"")
    (folder / "noise.tar.gz").write_bytes(
        bytes(random.Random(1).randrange(256) for _ in range(512))
    )
    (folder / "a-folder.tar.gz").mkdir(exist_ok=True)
    return {
        "empty": folder / "empty.tar.gz",
        "noise": folder / "noise.tar.gz",
        "folder": folder / "a-folder.tar.gz",
        "dot_dot": tar("dotdot", [("../evil.txt", tarfile.REGTYPE, b"x")]),
        "absolute": tar("absolute", [("/tmp/polymnesia-evil.txt", tarfile.REGTYPE, b"x")]),
        "symlink": tar("symlink", [("stages/k/f/link", tarfile.SYMTYPE, b"")]),
        "unlisted": tar("unlisted", [("stages/k/f/zeros.bin", tarfile.REGTYPE, b"\0" * 4096)]),
    }


def command_cases(folder: Path, full_disk: tuple[int, ...] = (0, 3, 12, 40)) -> list[Outcome]:
    """``report`` and ``compare`` on damaged run folders, ``cache import`` of hostile archives
    and a tiny run on a disk that fills after ``k`` writes for each ``k`` of ``full_disk``;
    every one must be refused in one line. Uses the cache of ``$POLYMNESIA_CACHE`` (a run folder per
    case)."""
    import os

    import yaml
    from cli_helpers import TINY_RUN

    from polymnesia.experiments import load_config

    quick = str(CONFIGS / "quickstart.yaml")
    out: list[Outcome] = []
    resolved = load_config(quick, TINY_RUN).model_dump(mode="json")
    good = yaml.safe_dump(resolved, sort_keys=False).encode()
    damaged = [(b, good) for b in DAMAGED_RUN_JSON] + [
        (b'{"stages": {}}', b"\xff\xfe"),
        (b'{"stages": {}}', good + b"\n" + BOMB.encode() + b"\n"),
        (b'{"stages": {}}', b"[]"),
    ]
    for i, (run_json, config) in enumerate(damaged):
        run_dir = folder / f"report-{i}"
        run_dir.mkdir()
        (run_dir / "run.json").write_bytes(run_json)
        (run_dir / "config.yaml").write_bytes(config)
        m = Mutation("quickstart.yaml", "damaged_run_folder", f"report-{i}", "refuse", b"")
        out.append(call(m, ["report", str(run_dir)]))
        m = Mutation("quickstart.yaml", "damaged_run_folder", f"compare-{i}", "refuse", b"")
        out.append(call(m, ["compare", str(run_dir), str(run_dir), "--out", str(folder / "cmp")]))
    out += record_cases(folder, quick)
    for name, archive in _hostile_archives(folder).items():
        m = Mutation("-", "hostile_archive", name, "refuse", b"")
        out.append(call(m, ["cache", "import", str(archive)]))
    cache = os.environ.get("POLYMNESIA_CACHE")
    for k in full_disk:
        os.environ["POLYMNESIA_CACHE"] = str(folder / f"cache-full-{k}")  # each fills anew
        m = Mutation("quickstart.yaml", "full_disk", f"after {k} writes", "refuse", b"")
        try:
            with full_disk_after(k):
                outcome = call(m, ["run", quick, *TINY_RUN, "--run-dir", str(folder / f"full-{k}")])
        finally:
            if cache is None:
                os.environ.pop("POLYMNESIA_CACHE", None)
            else:
                os.environ["POLYMNESIA_CACHE"] = cache
        if outcome.result == "refused" and "the disk is full" not in outcome.detail:
            outcome = Outcome(m, "refused-other", outcome.detail)
        out.append(outcome)
    return out


def _damaged_records(lines: list[str]) -> dict[str, str]:
    """``results/scores.jsonl`` contents of the "duplicated records" class: a score line
    given twice (as it was, with another value, further down), an empty file."""
    import json

    first = json.loads(lines[0])
    other = json.dumps({**first, "value": first["value"] / 2 + 1}, sort_keys=True) + "\n"
    return {
        "same_line_twice": "".join([*lines, lines[0]]),
        "other_value": "".join([lines[0], other, *lines[1:]]),
        "every_line_twice": "".join(lines + lines),
        "no_ci": "".join([*lines, json.dumps({**first, "ci_low": None, "ci_high": None}) + "\n"]),
        "empty": "",
        "blank_lines": "\n\n",
    }


def record_cases(folder: Path, quick: str) -> list[Outcome]:
    """The "duplicated records" class (issue 45 items 3 and 6): a tiny run, then ``report``
    and ``compare`` on copies whose ``results/scores.jsonl`` holds a key twice (tables would
    average the two) or no record, and ``report`` where ``report.md`` is a folder; each must
    be refused in one line naming the file. Then the "long integers" class of ``plan``'s
    ``--memory`` and ``--devices``."""
    import shutil

    from cli_helpers import TINY_RUN

    out: list[Outcome] = []
    run = folder / "records-run"
    m = Mutation("quickstart.yaml", "duplicated_records", "good run", "accept", b"")
    good = call(m, ["run", quick, *TINY_RUN, "--run-dir", str(run)])
    out.append(good)
    if good.result != "accepted":
        return out
    lines = (run / "results" / "scores.jsonl").read_text(encoding="utf-8").splitlines(True)
    for name, content in _damaged_records(lines).items():
        copy = folder / f"records-{name}"
        shutil.copytree(run, copy, symlinks=True)
        (copy / "results" / "scores.jsonl").write_text(content, encoding="utf-8")
        m = Mutation("quickstart.yaml", "duplicated_records", f"report {name}", "refuse", b"")
        out.append(call(m, ["report", str(copy)]))
        m = Mutation("quickstart.yaml", "duplicated_records", f"compare {name}", "refuse", b"")
        out.append(call(m, ["compare", str(run), str(copy), "--out", str(folder / "cmp")]))
    copy = folder / "records-report-folder"
    shutil.copytree(run, copy, symlinks=True)
    (copy / "report.md").unlink()
    (copy / "report.md").mkdir()
    m = Mutation("quickstart.yaml", "duplicated_records", "report.md a folder", "refuse", b"")
    out.append(call(m, ["report", str(copy)]))
    for option, value in (
        ("--memory", "9" * 400),
        ("--memory", "0.0000001B"),
        ("--memory", LONG_DIGITS + "GB"),
        ("--devices", str(HUGE_COUNT)),
        ("--devices", LONG_DIGITS),
    ):
        m = Mutation("quickstart.yaml", "long_integer", f"plan {option}", "refuse", b"")
        out.append(call(m, ["plan", quick, option, value]))
    return out


def silently_wrong(o: Outcome) -> bool:
    """A mutation that must be refused but was accepted (or refused for another reason), or
    one that must be accepted but was refused."""
    return (o.mutation.expect == "refuse" and o.result not in ("refused", "traceback")) or (
        o.mutation.expect == "accept" and o.result == "refused"
    )


def _shipped_hub_models() -> set[str]:
    """The Hub model ids the shipped configs name (``name_or_path: ORG/NAME``,
    ``instruct_model: ORG/NAME``)."""
    pattern = r"(?:name_or_path|instruct_model):\s*([\w.-]+/[\w.-]+)"
    return {m for p in CONFIGS.glob("*.yaml") for m in re.findall(pattern, p.read_text())}


def fuzz(folder: Path, seed: int = 0, per_config: int = 30) -> list[Outcome]:
    """Every mutation through ``validate`` or ``run --dry-run``. The Hub models the shipped
    configs name count as downloaded (as on a user's machine after ``huggingface-cli
    download``): the dry run refuses an uncached Hub id offline (its own tests in
    tests/cli/test_trivial_mistakes.py), which would hide every other mutation of those
    configs."""
    from unittest import mock

    import polymnesia.stages  # noqa: F401
    from polymnesia.experiments import model_checks

    downloaded = _shipped_hub_models()
    cached = model_checks.in_hub_cache
    with mock.patch.object(
        model_checks, "in_hub_cache", lambda name, *a: name in downloaded or cached(name, *a)
    ):
        return [
            run_one(m, folder, dry_run=i % 4 == 3)
            for i, m in enumerate(mutations(seed, per_config))
        ]


if __name__ == "__main__":
    import os
    import tempfile

    numbers = [a for a in sys.argv[1:] if not a.startswith("--")]
    seed = int(numbers[0]) if numbers else 0
    per = int(numbers[1]) if len(numbers) > 1 else 30
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("POLYMNESIA_CACHE", str(Path(tmp) / "cache"))
        (Path(tmp) / "configs").mkdir()
        results = fuzz(Path(tmp) / "configs", seed, per)
        if "--commands" in sys.argv:
            (Path(tmp) / "commands").mkdir()
            results += command_cases(Path(tmp) / "commands")
    for o in results:
        m = o.mutation
        flag = "" if o.result != "accepted" or m.expect != "any" else "  <- review"
        if o.result == "traceback" or silently_wrong(o) or flag:
            print(f"{o.result:9s} {m.config:28s} {m.kind:16s} {m.path:40s} {o.detail[:150]}{flag}")
    print(
        f"{len(results)} mutations: "
        + ", ".join(
            f"{k} {sum(o.result == k for o in results)}"
            for k in ("refused", "accepted", "traceback")
        )
        + f"; silently wrong {sum(silently_wrong(o) for o in results)}"
        + "; through the command line (overrides, run folders, commands) "
        + f"{sum(bool(o.mutation.args) or not o.mutation.text for o in results)}"
    )

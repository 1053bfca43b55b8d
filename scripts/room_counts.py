"""Print the counts of docs/architecture.md, "How well the rooms hold": modules over 450
lines, imports of polymnesia's own modules inside functions in ``cli/``, ``getattr``
calls in ``cli/`` and in the modules that check and plan configs, the places outside
``methods/`` that read or build plugin entries by name, and the functions that read a
stage's seed from its name.

Usage: ``python scripts/room_counts.py [REPO_ROOT]`` (default: this checkout)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

LIMIT = 450
CHECKERS = ("preflight", "model_checks", "planning")
#: what a later seed's copy of a stage is named by (``NAME.seedS``, experiments/seeds.py)
SEED_NAMING = ("SEED_TAG", "seed_stage_name")
#: the functions that write those names (fan-out), which read no seed from a name
SEED_NAMERS = ("seed_stage_name", "fan_out")


def _calls_getattr(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return sum(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "getattr"
        for n in ast.walk(tree)
    )


def _imports_in_functions(path: Path) -> int:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    count = 0
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for n in fn.body:
            for m in ast.walk(n):
                if isinstance(m, ast.ImportFrom) and (m.module or "").startswith("polymnesia"):
                    count += 1
    return count


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        body = getattr(n, "body", None)
        if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and (
            body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
        ):
            out.add(id(body[0].value))
    return out


def plugin_names(src: Path) -> set[str]:
    """The training plugins' names, as ``methods/`` registers them (``@PLUGINS.register`` or
    ``@step_merge`` with the name first), read from the source."""
    names = set()
    for path in (src / "methods").glob("*.py"):
        for n in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(n, ast.Call) and n.args and isinstance(n.args[0], ast.Constant):
                func = n.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called in ("register", "step_merge") and isinstance(n.args[0].value, str):
                    names.add(n.args[0].value)
    return names


def plugin_name_reads(path: Path, names: set[str]) -> list[int]:
    """The lines of ``path`` that read or build a plugin entry by name: a plugin's name as a
    string (not a docstring, nor the name of another registry's entry, ``X.register(NAME)``,
    ``Literal[NAME]`` or ``experiment: ... = NAME``: a protocol called like a plugin), and
    ``["name"]`` or ``.get("name")`` in a function that speaks of plugins."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    for n in ast.walk(tree):
        registers = isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "register"
        literal = isinstance(n, ast.Subscript) and getattr(n.value, "id", "") == "Literal"
        protocol = isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "experiment"
        if registers or literal or protocol:
            skip |= {id(c) for c in ast.walk(n) if isinstance(c, ast.Constant)}
    lines = [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and n.value in names and id(n) not in skip
    ]
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef) or "plugin" not in ast.unparse(fn):
            continue
        for n in ast.walk(fn):
            key = None
            if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant):
                key = n.slice.value
            elif isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "get" and n.args:
                key = getattr(n.args[0], "value", None)
            if key == "name" and isinstance(n, ast.expr):
                lines.append(n.lineno)
    return sorted(set(lines))


def _knows_seed_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """Whether ``fn`` uses the seed tag of stage names: :data:`SEED_NAMING`, the string
    ``".seed"``, ``.seed`` and a digit (``"x.seed1"``) or an f-string's ``.seed{s}``."""
    docs = {id(n.value) for n in ast.walk(fn) if isinstance(n, ast.Expr)}
    parts = {id(v) for n in ast.walk(fn) if isinstance(n, ast.JoinedStr) for v in n.values}
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and n.id in SEED_NAMING:
            return True
        if not isinstance(n, ast.Constant) or not isinstance(n.value, str) or id(n) in docs:
            continue
        if n.value == ".seed" or re.search(r"\.seed\d", n.value):
            return True
        if id(n) in parts and n.value.endswith(".seed"):
            return True
    return False


def seed_name_readers(src: Path) -> list[str]:
    """``module:function`` of each top-level function or method that reads a stage's seed from
    its name (uses the seed tag of stage names and is not one of :data:`SEED_NAMERS`)."""
    out = []
    for path in sorted(src.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defs = [n for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        for cls in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            defs += [n for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        for fn in defs:
            if fn.name not in SEED_NAMERS and _knows_seed_names(fn):
                out.append(f"{path.relative_to(src)}:{fn.name}")
    return out


def main(root: Path) -> None:
    src = root / "src" / "polymnesia"
    sizes = sorted(
        ((len(p.read_text(encoding="utf-8").splitlines()), p) for p in src.rglob("*.py")),
        reverse=True,
    )
    big = [(n, p.relative_to(src)) for n, p in sizes if n > LIMIT]
    print(f"modules over {LIMIT} lines: {len(big)}")
    for n, p in big:
        print(f"  {p} {n}")
    cli = sorted((src / "cli").rglob("*.py"))
    print(
        f"imports of polymnesia modules inside functions in cli/: "
        f"{sum(_imports_in_functions(p) for p in cli)}"
    )
    names = plugin_names(src)
    reads = {
        p.relative_to(src).as_posix(): plugin_name_reads(p, names)
        for p in sorted(src.rglob("*.py"))
        if p.relative_to(src).parts[0] != "methods"
        and p.relative_to(src).as_posix() != "training/plugins.py"  # the registry itself
    }
    reads = {k: v for k, v in reads.items() if v}
    print(
        f"plugin names read outside methods/ (and the registry): "
        f"{sum(len(v) for v in reads.values())} lines in {len(reads)} modules"
    )
    for k, v in reads.items():
        print(f"  {k} {','.join(map(str, v))}")
    checkers = [src / "experiments" / f"{m}.py" for m in CHECKERS]
    print(
        f"getattr calls in cli/: {sum(_calls_getattr(p) for p in cli)}; in "
        f"{', '.join(CHECKERS)}: {sum(_calls_getattr(p) for p in checkers)}"
    )
    readers = seed_name_readers(src)
    print(f"functions that read a stage's seed from its name: {len(readers)}")
    for r in readers:
        print(f"  {r}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)

"""Print the counts of docs/architecture.md, "How well the rooms hold": modules over 450
lines, imports of polymnesia's own modules inside functions in ``cli/``, ``getattr``
calls in ``cli/`` and in the modules that check and plan configs, and the functions that read
a stage's seed from its name.

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

"""Print the counts of docs/architecture.md, "How well the rooms hold": modules over 450
lines, imports of polymnesia's own modules inside functions in ``cli/``, and ``getattr``
calls in ``cli/`` and in the modules that check and plan configs.

Usage: ``python scripts/room_counts.py [REPO_ROOT]`` (default: this checkout)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

LIMIT = 450
CHECKERS = ("preflight", "model_checks", "planning")


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


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)

"""The package's layers go one way and its imports form no cycle (an AST walk, no imports run).

Layers, top to bottom (docs/architecture.md); a module may import its own layer or lower:

    cli
    experiments
    stages, testing, selfcheck, integrations
    methods, continual, tasks, evaluation, harness, training, penalties, reports
    models, tokenizers, gradients, merging, layers, metrics, items, data, instructions,
    pipeline
    results, config, io, registry, registry_imports, paths, errors, runtime, trust, jobs
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
TIERS = [
    {"cli", "__main__"},
    {"experiments"},
    {"stages", "testing", "selfcheck", "integrations"},
    {"methods", "continual", "tasks", "evaluation", "harness", "training", "penalties", "reports"},
    {
        "models",
        "tokenizers",
        "gradients",
        "merging",
        "layers",
        "metrics",
        "items",
        "data",
        "instructions",
        "pipeline",
    },
    {
        "results",
        "config",
        "io",
        "registry",
        "registry_imports",
        "paths",
        "errors",
        "runtime",
        "trust",
        "jobs",
        "hub",
        "shipped",
        "__init__",
    },
]
#: where an import inside a function is allowed for polymnesia's own modules: the command line
#: defers loading torch and transformers until a subcommand needs them (start-up cost)
LAZY_OK = {"cli"}


def tier(module: str) -> int:
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    for i, names in enumerate(TIERS):
        if top in names:
            return i
    raise AssertionError(f"{module} belongs to no layer: add its folder to TIERS and the docs")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


FILES = sorted(SRC.rglob("*.py"))
MODULES = {module_name(p) for p in FILES}


def imports(path: Path) -> list[tuple[str, bool, int]]:
    """``(imported polymnesia module, inside a function, line)`` for every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    me = module_name(path)
    is_pkg = path.name == "__init__.py"
    out: list[tuple[str, bool, int]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                out.extend((a.name, in_function, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    pkg = me.split(".") if is_pkg else me.split(".")[:-1]
                    pkg = pkg[: len(pkg) - (child.level - 1)]
                    base = ".".join([*pkg, base] if base else pkg)
                for a in child.names:  # `from pkg import submodule` imports the submodule
                    sub = f"{base}.{a.name}"
                    out.append((sub if sub in MODULES else base, in_function, child.lineno))
            visit(child, nested)

    visit(tree, False)
    return [(m, f, n) for m, f, n in out if m in MODULES]


GRAPH = {module_name(p): imports(p) for p in FILES}


def test_layers_go_one_way() -> None:
    upward = [
        f"{m} (line {n}) imports {target}"
        for m, edges in GRAPH.items()
        for target, _, n in edges
        if tier(target) < tier(m)
    ]
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_no_function_level_imports_of_own_modules() -> None:
    lazy = [
        f"{m} (line {n}) imports {target} inside a function"
        for m, edges in GRAPH.items()
        for target, inside, n in edges
        if inside and m.split(".")[1] not in LAZY_OK
    ]
    assert not lazy, "hoist these imports to the top of the module:\n" + "\n".join(lazy)


def test_no_module_imports_its_own_package() -> None:
    """A module takes names from the module that defines them, not from its package's
    ``__init__`` (which imports its modules to register them: that would be a cycle)."""
    bad = [
        f"{m} (line {n}) imports its package {target}"
        for m, edges in GRAPH.items()
        for target, _, n in edges
        if m.startswith(target + ".") and target != "polymnesia"
    ]
    assert not bad, "\n".join(bad)


def test_no_import_cycles() -> None:
    edges = {
        m: {t for t, _, _ in es if not m.startswith(t + ".") and t != m} for m, es in GRAPH.items()
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:  # Tarjan
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in edges:
        if v not in index:
            strong(v)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SRC)))
def test_every_module_has_a_layer(path: Path) -> None:
    tier(module_name(path))


def test_methods_hold_training_plugins() -> None:
    """Every module of ``methods/`` defines a training plugin (a class deriving
    ``TrainingPlugin``, directly or through another plugin class of the module): maths and
    file I/O that plugins use live in their own packages (``merging/``, ``penalties/``;
    issue 38)."""
    lacking = []
    for path in sorted((SRC / "polymnesia" / "methods").glob("*.py")):
        if path.name == "__init__.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        plugins = {"TrainingPlugin"}
        for node in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            bases = {b.id for b in node.bases if isinstance(b, ast.Name)}
            if bases & plugins:
                plugins.add(node.name)
        if plugins == {"TrainingPlugin"}:
            lacking.append(path.name)
    assert not lacking, f"modules of methods/ without a training plugin: {lacking}"


def test_nothing_imports_the_integrations() -> None:
    """``integrations/`` (the methods as Hugging Face Trainer callbacks) is an end point: it
    imports the methods' functions and transformers' Trainer, and no other module of the
    package imports it, so the loop and the stages never load the Trainer."""
    bad = [
        f"{m} (line {n}) imports {target}"
        for m, edges in GRAPH.items()
        for target, _, n in edges
        if target.startswith("polymnesia.integrations")
        and not m.startswith("polymnesia.integrations")
    ]
    assert not bad, "\n".join(bad)

"""The API reference (docs/api/, built by ``make docs``): every ``::: name`` on its pages names a
module or object in src/, every package of src/polymnesia has its reference, every page is in
the nav of mkdocs.yml, and the reST of the docstrings reaches mkdocstrings as Markdown."""

from __future__ import annotations

import ast
import importlib.util
import re
from pathlib import Path

import griffe
import yaml

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
DOCS = ROOT / "docs"
spec = importlib.util.spec_from_file_location("griffe_rst", ROOT / "scripts" / "griffe_rst.py")
rst = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
spec.loader.exec_module(rst)  # type: ignore[union-attr]

DIRECTIVE = re.compile(r"^::: (\S+)\s*$", re.M)


def identifiers() -> dict[str, Path]:
    """Every ``::: name`` of the reference pages, with the page that shows it."""
    out = {}
    for page in sorted((DOCS / "api").glob("*.md")):
        for name in DIRECTIVE.findall(page.read_text(encoding="utf-8")):
            out[name] = page
    return out


def module_file(dotted: str) -> Path | None:
    base = SRC.joinpath(*dotted.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def module_of(name: str) -> str:
    """The module a ``::: name`` is in: ``name`` itself, or the longest module prefix of it."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        if module_file(".".join(parts[:cut])) is not None:
            return ".".join(parts[:cut])
    raise AssertionError(f"{name}: no module of that name under src/")


def top_level_names(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return names


def packages() -> list[str]:
    return sorted(
        ".".join(p.parent.relative_to(SRC).parts) for p in (SRC / "polymnesia").rglob("__init__.py")
    )


def test_every_name_on_a_reference_page_is_in_src() -> None:
    names = identifiers()
    assert len(names) > 50
    for name, page in names.items():
        module = module_of(name)
        rest = name[len(module) + 1 :].split(".") if name != module else []
        if rest:
            path = module_file(module)
            assert path is not None
            assert rest[0] in top_level_names(path), (
                f"{page.name}: {name}: no {rest[0]} in {module}"
            )


def test_every_package_has_its_reference() -> None:
    # a package is covered by a ``::: name`` of itself or of a module directly in it, so a new
    # package (or a protocol's) without a reference page fails here
    modules = {module_of(name) for name in identifiers()}
    plain = {m for m in modules if m not in packages()}
    covered = modules | {m.rsplit(".", 1)[0] for m in plain}
    missing = [p for p in packages() if p not in covered]
    assert not missing, f"packages without a page in docs/api/: {missing}"
    assert {"polymnesia.experiments.lf_mlf", "polymnesia.data.sources"} <= set(packages())


def test_every_docs_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def pages(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [p for v in node.values() for p in pages(v)]
        if isinstance(node, list):
            return [p for v in node for p in pages(v)]
        return []

    nav = pages(config["nav"])
    on_disk = [
        str(p.relative_to(DOCS)) for p in sorted(DOCS.rglob("*.md")) if "runs" not in p.parts
    ]
    assert sorted(nav) == sorted(on_disk)
    assert len(nav) == len(set(nav))


def test_rest_roles_literal_blocks_and_doctests_become_markdown() -> None:
    text = (
        "See :func:`~polymnesia.results.pivot_mean`, :mod:`polymnesia.items` and\n"
        ":class:`the record <polymnesia.results.Score>`.\n"
        "\n"
        "Layout::\n"
        "\n"
        "    RUN_DIR/run.json   stages\n"
        "      nested\n"
        "\n"
        "After.\n"
        "\n"
        ">>> 1 + 1\n"
        "2"
    )
    assert rst.markdown_of_rst(text).split("\n") == [
        "See `pivot_mean`, `polymnesia.items` and",
        "`the record`.",
        "",
        "Layout:",
        "",
        "```",
        "RUN_DIR/run.json   stages",
        "  nested",
        "```",
        "",
        "After.",
        "",
        "```pycon",
        ">>> 1 + 1",
        "2",
        "```",
    ]


def test_the_extension_rewrites_what_griffe_loads(tmp_path: Path) -> None:
    pkg = tmp_path / "tinypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        '"""Uses :func:`f`."""\n\n\ndef f() -> None:\n    """Calls :meth:`~a.B.c`."""\n'
    )
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    options = config["plugins"][1]["mkdocstrings"]["handlers"]["python"]["options"]
    assert options["extensions"] == ["scripts/griffe_rst.py:RstToMarkdown"]
    module = griffe.load(
        "tinypkg", search_paths=[tmp_path], extensions=griffe.load_extensions(rst.RstToMarkdown)
    )
    assert module.docstring.value == "Uses `f`."
    assert module["f"].docstring.value == "Calls `c`."

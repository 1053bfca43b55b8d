"""docs/figures.md names every figure file the protocols write, and nothing else: the file
names are read from the code (string and f-string literals ending in ``.png`` under
``experiments/``), their varying parts (``{...}``) matched by the page's capitals
(``METRIC``, ``ARM``) and optional parts (``[_TASK]``)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "figures.md"
CODE = ROOT / "src" / "polymnesia" / "experiments"


def _code_patterns() -> dict[str, str]:
    """Regex of each figure file name (folder left out) -> where it is written."""
    out: dict[str, str] = {}
    for path in sorted(CODE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        inner = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
        for node in ast.walk(tree):
            if id(node) in inner:  # a piece of an f-string, read with the f-string
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                parts = [re.escape(node.value)]
            elif isinstance(node, ast.JoinedStr):
                parts = [
                    re.escape(v.value)
                    if isinstance(v, ast.Constant) and isinstance(v.value, str)
                    else "[A-Za-z0-9_]*"
                    for v in node.values
                ]
            else:
                continue
            text = "".join(parts)
            if text.endswith(r"\.png") and " " not in text and len(text) > len(r"\.png"):
                name = text.rsplit("/", 1)[-1]
                out[name] = f"{path.relative_to(ROOT)}:{node.lineno}"
    return out


def _documented() -> list[str]:
    """The file names in backticks of the page's tables, ``[...]`` kept as written."""
    names = re.findall(r"^\| `([^`]+\.png)` \|", PAGE.read_text(encoding="utf-8"), re.M)
    return [n.rsplit("/", 1)[-1] for n in names]


def _forms(name: str) -> list[str]:
    """A documented name with and without each optional ``[...]`` part."""
    if "[" not in name:
        return [name]
    head, rest = name.split("[", 1)
    inner, tail = rest.split("]", 1)
    return [f for t in _forms(tail) for f in (head + inner + t, head + t)]


def test_every_figure_the_code_writes_is_documented() -> None:
    code, documented = _code_patterns(), _documented()
    assert len(code) >= 14, code  # the scan found the figures (training loss to fig7)
    forms = [f for n in documented for f in _forms(n)]
    missing = [f"{where}: {pat}" for pat, where in code.items()
               if not any(re.fullmatch(pat, f) for f in forms)]  # fmt: skip
    assert not missing, f"figures written but not in docs/figures.md: {missing}"


def test_every_documented_figure_is_written_by_the_code() -> None:
    code = _code_patterns()
    phantom = [n for n in _documented() if not any(re.fullmatch(p, _forms(n)[0]) for p in code)]
    assert not phantom, f"docs/figures.md names figures no code writes: {phantom}"


def test_the_page_is_linked_from_reports_and_the_nav() -> None:
    assert "figures.md" in (ROOT / "docs" / "reports.md").read_text(encoding="utf-8")
    assert "figures.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")

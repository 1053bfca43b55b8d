"""A griffe extension for the API reference (mkdocs.yml): polymnesia's docstrings are written
in plain reST, and mkdocstrings renders Markdown. Before a docstring is parsed it rewrites the
three reST forms they use that Markdown would garble:

- cross-reference roles, ``:func:`~polymnesia.results.Score``` -> ```Score``` (as Sphinx shows
  them: ``~`` keeps the last name, ``text <target>`` the text);
- literal blocks, ``Layout::`` and an indented block -> ``Layout:`` and a fenced block;
- doctest blocks, ``>>> ...`` lines and their output -> a fenced ``pycon`` block.

It changes only what the reference shows; the docstrings in the source stay as they are.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:py:)?(?:mod|func|class|meth|attr|data|obj|exc|const):`([^`]+)`")


def _role_text(match: re.Match[str]) -> str:
    target = match.group(1).strip().lstrip("!")
    titled = re.fullmatch(r"(.+?)\s*<([^>]+)>", target)
    if titled:
        return f"`{titled.group(1)}`"
    if target.startswith("~"):
        target = target[1:].rsplit(".", 1)[-1]
    return f"`{target}`"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _fence(lines: list[str], cut: int, indent: int, lang: str = "") -> list[str]:
    """``lines`` in a fenced block at ``indent`` spaces, each first cut by ``cut`` spaces."""
    pad = " " * indent
    body = [pad + ln[cut:] if ln.strip() else "" for ln in lines]
    return [f"{pad}```{lang}", *body, f"{pad}```"]


def markdown_of_rst(text: str) -> str:
    """The docstring ``text`` with its reST roles, literal blocks and doctests as Markdown."""
    text = ROLE.sub(_role_text, text)
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith(">>>"):
            indent = _indent(line)
            j = i
            while j < len(lines) and lines[j].strip():
                j += 1
            out.extend(_fence(lines[i:j], indent, indent, "pycon"))
            i = j
            continue
        if stripped.endswith("::") and not stripped.startswith(".."):
            indent = _indent(line)
            j = i + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            k = j
            while k < len(lines) and (not lines[k].strip() or _indent(lines[k]) > indent):
                k += 1
            while k > j and not lines[k - 1].strip():
                k -= 1
            if k > j:
                head = line.rstrip()[:-2].rstrip()
                if head.strip():
                    out.append(head + ":")
                out.append("")
                block_indent = min(_indent(ln) for ln in lines[j:k] if ln.strip())
                out.extend(_fence(lines[j:k], block_indent, indent))
                i = k
                continue
        out.append(line)
        i += 1
    return "\n".join(out)


def _rewrite(obj: griffe.Object) -> None:
    if obj.docstring is not None:
        obj.docstring.value = markdown_of_rst(obj.docstring.value)


class RstToMarkdown(griffe.Extension):
    """Rewrites every docstring of the loaded package with :func:`markdown_of_rst`."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        _rewrite(pkg)  # the package itself: griffe fires ``on_object`` for its members only

    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        _rewrite(obj)

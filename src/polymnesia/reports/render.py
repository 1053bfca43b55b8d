"""A tiny report builder: one list of sections rendered to ``report.md`` and ``report.html``.

>>> r = Report("Active forgetting, 400M")
>>> r.heading("Perplexity").paragraph("Lower is better.")  # doctest: +ELLIPSIS
<...Report object at ...>

Both files come from the same sections, so they never disagree: Markdown for
reading in a terminal or on a forge, HTML as one self-contained file (styles
inline, images embedded as base64 ``data:`` URIs) for sharing. Paragraphs
and bullets support the inline Markdown subset ``**bold**``, ``*italic*``
and ```code```; everything else is escaped in HTML.
"""

from __future__ import annotations

import base64
import html
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polymnesia.errors import ConfigError
from polymnesia.io import atomic_write_text
from polymnesia.reports.tables import Table, format_cell, table_markdown_block

_STYLE = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 0.3em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f2f2f2; }
tr.block td { background: #fafafa; font-style: italic; text-align: left; }
.table-title { font-weight: 600; margin-top: 1.2em; }
.caption, figcaption { color: #555; font-size: 0.9em; }
figure { margin: 1em 0; } figure img { max-width: 100%; }
pre { background: #f6f6f6; padding: 0.7em; overflow-x: auto; }
.missing { color: #b00; }
"""


@dataclass(frozen=True)
class Section:
    kind: str  # heading | paragraph | table | image | bullets | code
    payload: Any
    level: int = 0
    caption: str = ""


class Report:
    """Collects sections in order; :meth:`write` renders them into a run folder."""

    def __init__(self, title: str, floatfmt: str = ".3f") -> None:
        self.title = title
        self.floatfmt = floatfmt
        self.sections: list[Section] = []

    def heading(self, text: str, level: int = 2) -> Report:
        if level not in range(1, 7):
            raise ConfigError(f"heading level {level} is out of range; accepted: 1 to 6")
        return self._add(Section("heading", text, level))

    def paragraph(self, text: str) -> Report:
        return self._add(Section("paragraph", text))

    def table(self, table: Table) -> Report:
        return self._add(Section("table", table))

    def image(self, relpath: str, caption: str = "") -> Report:
        """An image by its path relative to the run folder (e.g. ``plots/ppl.png``)."""
        if os.path.isabs(relpath) or ".." in Path(relpath).parts:
            raise ConfigError(
                f"image path '{relpath}' must be relative to the run folder, e.g. 'plots/x.png'"
            )
        return self._add(Section("image", relpath, caption=caption))

    def bullets(self, items: list[str]) -> Report:
        return self._add(Section("bullets", [str(i) for i in items]))

    def code(self, text: str) -> Report:
        return self._add(Section("code", text))

    def _add(self, section: Section) -> Report:
        self.sections.append(section)
        return self

    # ------------------------------------------------------------- Markdown

    def to_markdown(self) -> str:
        parts = [f"# {self.title}\n"] + [_md_section(s, self.floatfmt) for s in self.sections]
        return "\n".join(parts)

    # ----------------------------------------------------------------- HTML

    def to_html(self, run_dir: str | os.PathLike[str]) -> str:
        """Self-contained HTML; images are read from ``run_dir`` and embedded."""
        body = "\n".join(_html_section(s, Path(run_dir), self.floatfmt) for s in self.sections)
        title = html.escape(self.title)
        return (
            f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{title}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            f"<h1>{title}</h1>\n{body}\n</body>\n</html>\n"
        )

    def write(self, run_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
        """Write ``report.md`` and ``report.html`` into ``run_dir`` atomically; returns both paths."""
        root = Path(run_dir)
        md_path, html_path = root / "report.md", root / "report.html"
        atomic_write_text(md_path, self.to_markdown())
        atomic_write_text(html_path, self.to_html(root))
        return md_path, html_path


def _md_section(s: Section, floatfmt: str) -> str:
    if s.kind == "heading":
        return f"{'#' * s.level} {s.payload}\n"
    if s.kind == "paragraph":
        return f"{s.payload}\n"
    if s.kind == "table":
        return table_markdown_block(s.payload, floatfmt)
    if s.kind == "image":
        alt = s.caption or Path(s.payload).stem
        return f"![{alt}]({s.payload})\n" + (f"\n*{s.caption}*\n" if s.caption else "")
    if s.kind == "bullets":
        return "".join(f"- {item}\n" for item in s.payload)
    return f"```\n{s.payload.rstrip()}\n```\n"


def inline_html(text: str) -> str:
    """Escape ``text`` and render inline ``code``, **bold** and *italic*."""
    out = html.escape(str(text), quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"<em>\1</em>", out)


def _html_section(s: Section, run_dir: Path, floatfmt: str) -> str:
    if s.kind == "heading":
        return f"<h{s.level}>{inline_html(s.payload)}</h{s.level}>"
    if s.kind == "paragraph":
        return f"<p>{inline_html(s.payload)}</p>"
    if s.kind == "table":
        return table_html(s.payload, floatfmt)
    if s.kind == "image":
        return _image_html(run_dir, s.payload, s.caption)
    if s.kind == "bullets":
        return "<ul>" + "".join(f"<li>{inline_html(i)}</li>" for i in s.payload) + "</ul>"
    return f"<pre><code>{html.escape(s.payload)}</code></pre>"


def table_html(table: Table, floatfmt: str = ".3f") -> str:
    """An HTML ``<table>`` straight from a :class:`Table` (block rows span all columns)."""
    width = len(table.columns)
    bold = set(table.bold)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
    rows = []
    for i, row in enumerate(table.rows):
        if table.is_block_row(row):
            rows.append(
                f'<tr class="block"><td colspan="{width}">{html.escape(table.block_label(row))}</td></tr>'
            )
            continue
        cells = [html.escape(format_cell(v, floatfmt)) for v in row]
        cells = [f"<strong>{c}</strong>" if (i, j) in bold else c for j, c in enumerate(cells)]
        rows.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    title = f'<div class="table-title">{inline_html(table.title)}</div>\n' if table.title else ""
    caption = f'\n<div class="caption">{inline_html(table.caption)}</div>' if table.caption else ""
    return (
        f"{title}<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n"
        + "\n".join(rows)
        + f"\n</tbody>\n</table>{caption}"
    )


def _image_html(run_dir: Path, relpath: str, caption: str) -> str:
    """The image as a base64 ``data:`` URI; a missing file shows a visible note instead of failing."""
    path = run_dir / relpath
    cap = f"<figcaption>{inline_html(caption)}</figcaption>" if caption else ""
    if not path.is_file():
        return f'<p class="missing">[missing image: {html.escape(relpath)}]</p>'
    mime = {
        ".png": "image/png",
        ".svg": "image/svg+xml",
        ".jpg": "image/jpeg",
        ".jpeg": "image/jpeg",
    }.get(path.suffix.lower(), "application/octet-stream")
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    alt = html.escape(caption or path.stem)
    return f'<figure><img src="data:{mime};base64,{data}" alt="{alt}">{cap}</figure>'

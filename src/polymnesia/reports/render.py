"""A tiny report builder: one list of sections rendered to ``report.md`` and ``report.html``.

>>> r = Report("Active forgetting, 400M")
>>> r.heading("Perplexity").paragraph("Lower is better.")  # doctest: +ELLIPSIS
<...Report object at ...>

Both files come from the same sections, so they never disagree: Markdown for
reading in a terminal or on a forge, HTML as one self-contained file (styles
inline, images embedded as base64 ``data:`` URIs, no script, nothing fetched
from the network) for sharing. Paragraphs and bullets support the inline
Markdown subset ``**bold**``, ``*italic*`` and ```code```; everything else is
escaped in HTML.

Layout rules, applied to both files:

* claims blocks (:meth:`Report.claims`) come first, after the title and any
  paragraphs before the first heading; then (HTML) a table of contents of the
  level-2 and level-3 headings;
* a heading followed by nothing before the next heading of its level or
  above is dropped (a section with nothing to show);
* a table title or figure caption equal to the heading just above it is not
  repeated;
* in HTML, wide tables scroll sideways inside their box and figures scale to
  the page width, so nothing overflows a laptop screen.
"""

from __future__ import annotations

import base64
import html
import os
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from polymnesia.errors import ConfigError
from polymnesia.io import atomic_write_text
from polymnesia.reports.claims import Claim
from polymnesia.reports.claims_table import claims_html, claims_markdown
from polymnesia.reports.table_core import Estimate, Table, format_cell, table_markdown_block

_STYLE = """
*, *::before, *::after { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body { font-family: system-ui, sans-serif; line-height: 1.45; max-width: 1100px; margin: 1.5em auto;
  padding: 0 1em; color: #222; }
p, li, figcaption, .caption, .table-title, h1, h2, h3, h4 { overflow-wrap: anywhere; }
.table-wrap { max-width: 100%; overflow-x: auto; margin: 0.5em 0 0.3em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; white-space: nowrap; }
th:first-child, td:first-child { text-align: left; }
td.prose { white-space: normal; text-align: left; min-width: 14em; max-width: 32em; }
th { background: #f2f2f2; position: sticky; top: 0; }
tr.block td { background: #fafafa; font-style: italic; text-align: left; }
.table-title { font-weight: 600; margin-top: 1.2em; }
.caption, figcaption { color: #555; font-size: 0.9em; max-width: 60em; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto; display: block; }
pre { background: #f6f6f6; padding: 0.7em; overflow-x: auto; max-width: 100%; }
nav.toc { background: #f7f7f9; border: 1px solid #e3e3e8; padding: 0.5em 1em; margin: 1em 0; }
nav.toc ul { margin: 0.2em 0; padding-left: 1.2em; }
nav.toc li.l3 { margin-left: 1.2em; font-size: 0.95em; }
p.banner { background: #fff8c5; border: 1px solid #d4a72c; border-radius: 6px; padding: 0.5em 1em;
  font-weight: 600; }
.claims { border: 1px solid #d0d7de; border-radius: 6px; padding: 0.3em 1em 0.8em; margin: 1em 0; }
.claims .table-wrap { overflow-x: visible; }
table.claims-table { width: 100%; table-layout: fixed; }
.claims th, .claims td {
  white-space: normal; text-align: left; vertical-align: top; overflow-wrap: anywhere;
}
.claims col.c0 { width: 2.8em; } .claims col.c1 { width: 20%; } .claims col.c2 { width: 12%; }
.claims col.c3 { width: 19.5%; } .claims col.c4 { width: 5.2em; } .claims col.c5 { width: 5.2em; }
.claims col.c6 { width: 4.2em; } .claims p.block { font-weight: 600; margin: 1em 0 0.3em; }
.claims td:first-child, .claims td.n, .claims td.p, .claims .num,
.claims .nw { white-space: nowrap; }
.claims td.effect .label, .claims td.effect .margin, .claims td .why { display: block; }
.claims td.effect .label, .claims td.effect .margin { color: #555; font-size: 0.92em; }
.claims td .why { font-weight: normal; color: #57606a; font-size: 0.92em; margin-top: 0.2em; }
.claims td.test { font-size: 0.92em; color: #333; }
.claims td.test .source { display: block; color: #555; }
tr.claim .verdict { font-weight: 600; } tr.claim.holds .verdict { color: #116329; }
tr.claim.contradicted .verdict { color: #b42318; }
tr.claim.inconclusive .verdict { color: #7a5d00; }
tr.claim.not-applicable .verdict, tr.claim.not-testable .verdict { color: #57606a; }
.missing { color: #b00; }
"""


@dataclass(frozen=True)
class Section:
    kind: str  # heading | paragraph | table | image | bullets | code | claims
    payload: Any
    level: int = 0
    caption: str = ""


class Report:
    """Collects sections in order; :meth:`write` renders them into a run folder."""

    def __init__(self, title: str, floatfmt: str = ".3f", banner: str = "") -> None:
        """``banner``: lines shown under the title, before everything else, one box each (a
        smoke config's "this tests the code, not the paper", a partial run's missing arms)."""
        self.title = title
        self.floatfmt = floatfmt
        self.banner = banner
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

    def claims(
        self, claims: list[Claim], title: str = "The paper's claims at this scale"
    ) -> Report:
        """A claims block (:mod:`polymnesia.reports.claims`), shown at the top of the report."""
        return self._add(Section("claims", list(claims), caption=title))

    def _banners(self) -> list[str]:
        return [line for line in self.banner.split("\n") if line.strip()]

    def _add(self, section: Section) -> Report:
        self.sections.append(section)
        return self

    # ------------------------------------------------------------- Markdown

    def to_markdown(self) -> str:
        top = [f"# {self.title}\n"] + [f"> **{line}**\n" for line in self._banners()]
        parts = top + [
            _md_section(sec, self.floatfmt, above) for sec, above in _laid_out(self.sections)
        ]
        return "\n".join(parts)

    # ----------------------------------------------------------------- HTML

    def to_html(self, run_dir: str | os.PathLike[str]) -> str:
        """Self-contained HTML; images are read from ``run_dir`` and embedded."""
        laid = _laid_out(self.sections)
        ids = _anchors([sec for sec, _ in laid])
        body = [
            _html_section(sec, Path(run_dir), self.floatfmt, above, ids.get(i))
            for i, (sec, above) in enumerate(laid)
        ]
        toc = _toc_html(laid, ids)
        at = next((i for i, (sec, _) in enumerate(laid) if sec.kind == "heading"), len(body))
        body.insert(at, toc)
        title = html.escape(self.title)
        return (
            f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<title>{title}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            f"<h1>{title}</h1>\n"
            + "".join(f'<p class="banner">{html.escape(line)}</p>\n' for line in self._banners())
            + "\n".join(b for b in body if b)
            + "\n</body>\n</html>\n"
        )

    def write(self, run_dir: str | os.PathLike[str]) -> tuple[Path, Path]:
        """Write ``report.md`` and ``report.html`` into ``run_dir`` atomically; returns both
        paths.
        """
        root = Path(run_dir)
        md_path, html_path = root / "report.md", root / "report.html"
        atomic_write_text(md_path, self.to_markdown())
        atomic_write_text(html_path, self.to_html(root))
        return md_path, html_path


def _laid_out(sections: list[Section]) -> list[tuple[Section, str]]:
    """Sections in display order with the heading text above each: claims hoisted, empty headings
    dropped.
    """
    claims = [sec for sec in sections if sec.kind == "claims"]
    rest = [sec for sec in sections if sec.kind != "claims"]
    first = next((i for i, sec in enumerate(rest) if sec.kind == "heading"), len(rest))
    ordered = rest[:first] + claims + rest[first:]
    kept = [sec for i, sec in enumerate(ordered) if not _empty_heading(ordered, i)]
    out, above = [], ""
    for sec in kept:
        out.append((sec, above))
        above = sec.payload if sec.kind == "heading" else ""
    return out


def _empty_heading(sections: list[Section], i: int) -> bool:
    """A heading with only headings before the next one of its level or above (or the end)."""
    if sections[i].kind != "heading":
        return False
    for nxt in sections[i + 1 :]:
        if nxt.kind != "heading":
            return False
        if nxt.level <= sections[i].level:
            return True
    return True


def _same(text: str, heading: str) -> bool:
    """Whether a title or caption only repeats the heading above it."""

    def norm(x: str) -> str:
        return re.sub(r"[\s.:]+$", "", re.sub(r"\s+", " ", x)).strip().lower()

    return bool(heading) and norm(text) == norm(heading)


def _md_section(s: Section, floatfmt: str, above: str = "") -> str:
    if s.kind == "heading":
        return f"{'#' * s.level} {s.payload}\n"
    if s.kind == "paragraph":
        return f"{s.payload}\n"
    if s.kind == "table":
        table = s.payload
        if _same(table.title, above):
            table = replace(table, title="")
        return table_markdown_block(table, floatfmt)
    if s.kind == "image":
        alt = s.caption or Path(s.payload).stem
        shown = s.caption and not _same(s.caption, above)
        return f"![{alt}]({s.payload})\n" + (f"\n*{s.caption}*\n" if shown else "")
    if s.kind == "bullets":
        return "".join(f"- {item}\n" for item in s.payload)
    if s.kind == "claims":
        return f"## {s.caption}\n\n{claims_markdown(s.payload)}"
    return f"```\n{s.payload.rstrip()}\n```\n"


def inline_html(text: str) -> str:
    """Escape ``text`` and render inline ``code``, **bold** and *italic*."""
    out = html.escape(str(text), quote=False)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?![\w*])", r"<em>\1</em>", out)


def _anchors(sections: list[Section]) -> dict[int, str]:
    """Unique ``id`` slugs for the level-2/3 headings and the claims block, by section index."""
    out: dict[int, str] = {}
    seen: set[str] = set()
    for i, sec in enumerate(sections):
        text = sec.caption if sec.kind == "claims" else sec.payload
        if sec.kind == "claims" or (sec.kind == "heading" and sec.level in (2, 3)):
            base = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-") or "section"
            slug, k = base, 2
            while slug in seen:
                slug, k = f"{base}-{k}", k + 1
            seen.add(slug)
            out[i] = slug
    return out


def _toc_html(laid: list[tuple[Section, str]], ids: dict[int, str]) -> str:
    items = []
    for i, (sec, _) in enumerate(laid):
        if i in ids:
            level = 2 if sec.kind == "claims" else sec.level
            text = sec.caption if sec.kind == "claims" else sec.payload
            items.append(f'<li class="l{level}"><a href="#{ids[i]}">{inline_html(text)}</a></li>')
    if len(items) < 2:
        return ""
    return '<nav class="toc"><strong>Contents</strong><ul>' + "".join(items) + "</ul></nav>"


def _html_section(
    s: Section, run_dir: Path, floatfmt: str, above: str = "", anchor: str | None = None
) -> str:
    id_attr = f' id="{anchor}"' if anchor else ""
    if s.kind == "heading":
        return f"<h{s.level}{id_attr}>{inline_html(s.payload)}</h{s.level}>"
    if s.kind == "paragraph":
        return f"<p>{inline_html(s.payload)}</p>"
    if s.kind == "table":
        table = s.payload
        return table_html(
            replace(table, title="") if _same(table.title, above) else table, floatfmt
        )
    if s.kind == "image":
        return _image_html(
            run_dir, s.payload, "" if _same(s.caption, above) else s.caption, s.caption
        )
    if s.kind == "bullets":
        return "<ul>" + "".join(f"<li>{inline_html(i)}</li>" for i in s.payload) + "</ul>"
    if s.kind == "claims":
        return f"<h2{id_attr}>{inline_html(s.caption)}</h2>\n{claims_html(s.payload)}"
    return f"<pre><code>{html.escape(s.payload)}</code></pre>"


#: text cells longer than this wrap in their cell (``td.prose``); shorter ones stay on one line
PROSE_FROM = 40


def table_html(table: Table, floatfmt: str = ".3f") -> str:
    """An HTML ``<table>`` straight from a :class:`Table`, in a box that scrolls sideways when wide.

    Block rows span all columns; a cell with an interval gets a tooltip with its bounds and ``n``;
    a text cell longer than :data:`PROSE_FROM` characters wraps (``td.prose``).
    """
    floatfmt = table.floatfmt or floatfmt
    width = len(table.columns)
    bold = set(table.bold)
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in table.columns)
    rows = []
    for i, row in enumerate(table.rows):
        if table.is_block_row(row):
            rows.append(
                '<tr class="block"><td '
                f'colspan="{width}">{html.escape(table.block_label(row))}</td></tr>'
            )
            continue
        cells = []
        for j, v in enumerate(row):
            text = html.escape(format_cell(v, floatfmt))
            text = f"<strong>{text}</strong>" if (i, j) in bold else text
            # a sentence (a setup check's wording) wraps in its cell instead of widening the table
            prose = ' class="prose"' if isinstance(v, str) and len(v) > PROSE_FROM else ""
            cells.append(f"<td{prose}{_tooltip(v, floatfmt)}>{text}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    title = f'<div class="table-title">{inline_html(table.title)}</div>\n' if table.title else ""
    caption = f'\n<div class="caption">{inline_html(table.caption)}</div>' if table.caption else ""
    return (
        f'{title}<div class="table-wrap"><table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n'
        + "\n".join(rows)
        + f"\n</tbody>\n</table></div>{caption}"
    )


def _tooltip(value: object, floatfmt: str) -> str:
    if not isinstance(value, Estimate) or not value.has_ci:
        return ""
    n = f", n = {value.n}" if value.n is not None else ""
    text = f"CI [{format(value.low, floatfmt)}, {format(value.high, floatfmt)}]{n}"
    return f' title="{html.escape(text)}"'


def _image_html(run_dir: Path, relpath: str, caption: str, alt_text: str = "") -> str:
    """The image as a base64 ``data:`` URI; a missing file shows a visible note instead of
    failing.
    """
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
    alt = html.escape(alt_text or caption or path.stem)
    return f'<figure><img src="data:{mime};base64,{data}" alt="{alt}">{cap}</figure>'

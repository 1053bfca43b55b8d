"""The claims section of a report: a one-line tally (:func:`verdict_summary`), and a
table per block (paper, extensions, preconditions; :data:`BLOCKS`) with the statement, the
effect with its interval and band, the raw and Holm-adjusted p, n and the test, in Markdown
(:func:`claims_markdown`) and HTML (:func:`claims_html`)."""

from __future__ import annotations

import html
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace

from polymnesia.metrics.stats import CORRECTIONS
from polymnesia.reports.claims import Claim, correct
from polymnesia.reports.table_core import Table, to_markdown
from polymnesia.reports.verdicts import (
    ALPHA,
    BADGE,
    CORRECTION,
    MEASURE_HINT,
    TESTED,
    UNMEASURED,
    Kind,
    format_df,
)

#: the blocks of a claims section, in order: (kind, heading above the block, statement column)
BLOCKS: tuple[tuple[Kind, str, str], ...] = (
    ("paper", "", "Claim (paper)"),
    (
        "extension",
        "Extensions: comparisons the paper does not make, judged as a family of their own",
        "Claim (extension)",
    ),
    (
        "precondition",
        "Setup checks: preconditions of the claims, left out of the counts and the correction",
        "Check (setup)",
    ),
)


def _corrected(claims: Sequence[Claim]) -> list[Claim]:
    """The claims after the block's multiplicity correction (kept if already applied)."""
    if any(c.correction for c in claims):
        return list(claims)
    return correct(claims)


def _plural(n: int, one: str, many: str) -> str:
    return one if n == 1 else many


def _tally(claims: Sequence[Claim]) -> tuple[int, Counter[str]]:
    counts: Counter[str] = Counter(c.verdict for c in claims)
    return sum(counts[v] for v in TESTED), counts


def verdict_summary(claims: Sequence[Claim]) -> str:
    """ "k of the paper's m claims were testable at this scale; of those, h hold, c are
    contradicted, i are inconclusive.", then the claims set aside, the extensions, the setup
    checks, the rule and the correction."""
    if not claims:
        return "No claim could be checked in this run."
    claims = _corrected(claims)
    paper = [c for c in claims if c.kind == "paper"]
    k, counts = _tally(paper)
    h = counts["holds"]
    text = (
        f"{k} of the paper's {len(paper)} claim{_plural(len(paper), ' was', 's were')} testable "
        f"at this scale; of those, {h} {_plural(h, 'holds', 'hold')}, "
        f"{counts['contradicted']} {_plural(counts['contradicted'], 'is', 'are')} contradicted, "
        f"{counts['inconclusive']} {_plural(counts['inconclusive'], 'is', 'are')} inconclusive."
    )
    aside = [f"{counts[v]} {v}" for v in ("not applicable", "not testable") if counts[v]]
    if counts["seed noise not measured"]:
        aside.append(f"{counts['seed noise not measured']} {UNMEASURED} ({MEASURE_HINT})")
    if aside:
        text += " Not tested: " + ", ".join(aside) + "."
    ext = [c for c in claims if c.kind == "extension"]
    if ext:
        ke, ce = _tally(ext)
        text += (
            f" Extensions (comparisons the paper does not make, a family of their own): {ke} of "
            f"{len(ext)} testable; {ce['holds']} {_plural(ce['holds'], 'holds', 'hold')}, "
            f"{ce['contradicted']} contradicted, {ce['inconclusive']} inconclusive."
        )
    pre = [c for c in claims if c.kind == "precondition"]
    if pre:
        passed = sum(1 for c in pre if c.verdict == "holds")
        text += (
            f" Setup checks (preconditions, outside the counts and the correction): {passed} of "
            f"{len(pre)} pass."
        )
    text += (
        " Holds / contradicted: the effect's interval excludes the boundary (zero or a "
        f"non-inferiority margin) and the adjusted p is below {ALPHA:g}; inconclusive: not both."
    )
    if any(c.noise is not None and c.testable for c in claims):
        text += (
            " One training seed: each interval is widened by the config's own seed noise (the "
            "standard deviation of the effect over other seeds of the same config, Student t), "
            "so the band can make a claim inconclusive whichever way it points."
        )
    families = [
        (kind, sum(1 for c in claims if c.kind == kind and c.correction))
        for kind in ("paper", "extension")
    ]
    method = next((c.correction for c in claims if c.correction), CORRECTION)
    shown = [
        f"the {n} tested {'paper' if kind == 'paper' else 'extension'} claim{_plural(n, '', 's')}"
        for kind, n in families
        if n
    ]
    if shown:
        text += (
            f" p: each test's own, from the distribution of its interval; adjusted p: "
            f"{CORRECTIONS[method]} within each family ({' and, apart, '.join(shown)})."
        )
    return text


def _label(method: str) -> str:
    return {"holm": "Holm", "benjamini-hochberg": "BH"}[method]


def _test_text(c: Claim) -> str:
    return f"{c.test_design}; {c.test}" + (f"; {c.source}" if c.source else "")


def claims_table(claims: Sequence[Claim], fmt: str = ".3f") -> Table:
    """Every claim as one :class:`Table` (written as ``claims.csv``), after the correction:
    its id, kind, statement, verdict, effect and interval, the raw and the adjusted p, the
    interval's df, the design, the seed-noise band used, n and the test."""
    claims = _corrected(claims)
    rows = [
        [
            i + 1,
            c.id,
            c.kind,
            c.statement,
            c.verdict_text(),
            (c.effect_label + ": " if c.effect_label else "") + c.evidence(fmt),
            c.paper,
            "" if c.headroom_share() is None else f"{100 * (c.headroom_share() or 0):+.0f}%",
            c.shown_p(),
            c.shown_p_adjusted(),
            format_df(c.judged()[2]),
            c.test_design,
            c.noise.text(fmt) if c.noise is not None else (c.unmeasured or ""),
            c.n,
            c.test + (f"; {c.source}" if c.source else ""),
        ]
        for i, c in enumerate(claims)
    ]
    level = f"{round(100 * claims[0].level)}%" if claims else "95%"
    method = next((c.correction for c in claims if c.correction), CORRECTION)
    return Table(
        name="claims",
        title="",
        columns=[
            "#",
            "id",
            "Kind",
            "Claim (paper)",
            "Verdict",
            f"Effect [{level} CI]",
            "Paper",
            "Headroom share",
            "p",
            f"p ({_label(method)})",
            "df",
            "Design",
            "Seed noise",
            "n",
            "Test",
        ],
        rows=rows,
    )


def _display_table(
    numbered: Sequence[tuple[int, Claim]], head: str, fmt: str, method: str, level: str
) -> Table:
    rows = [
        [
            i,
            c.statement,
            c.verdict_text(),
            (c.effect_label + ": " if c.effect_label else "")
            + c.evidence(fmt)
            + (f"; {c.context()}" if c.context() else ""),
            c.shown_p(),
            c.shown_p_adjusted(),
            c.n,
            _test_text(c),
        ]
        for i, c in numbered
    ]
    columns = [
        "#",
        head,
        "Verdict",
        f"Effect [{level} CI]",
        "p",
        f"p ({_label(method)})",
        "n",
        "Test",
    ]
    return Table(name="claims", title="", columns=columns, rows=rows)


def claims_block_table(
    claims: Sequence[Claim], head: str = "Claim (paper)", fmt: str = ".3f"
) -> Table:
    """The claims as displayed in a report (numbered from 1, the raw and the adjusted p, the
    design in the test column), with ``head`` over the statements; the claims are shown as
    they are (correct them first where a family applies)."""
    level = f"{round(100 * claims[0].level)}%" if claims else "95%"
    method = next((c.correction for c in claims if c.correction), CORRECTION)
    return _display_table(list(enumerate(claims, 1)), head, fmt, method, level)


def _blocks(claims: Sequence[Claim]) -> list[tuple[str, list[tuple[int, Claim]], str]]:
    """``(heading, [(number, claim)], statement column)`` per non-empty block, numbered in
    the order shown."""
    out, n = [], 0
    for kind, heading, head in BLOCKS:
        mine = [c for c in claims if c.kind == kind]
        if mine:
            out.append((heading, [(n + j + 1, c) for j, c in enumerate(mine)], head))
            n += len(mine)
    return out


def claims_markdown(claims: Sequence[Claim], fmt: str = ".3f") -> str:
    """A Markdown block: the verdict summary, then the paper's claims, the extensions and the
    setup checks, one table each."""
    claims = _corrected(claims)
    level = f"{round(100 * claims[0].level)}%" if claims else "95%"
    method = next((c.correction for c in claims if c.correction), CORRECTION)
    parts = [verdict_summary(claims)]
    for heading, numbered, head in _blocks(claims):
        if heading:
            parts.append(f"{heading}:")
        parts.append(to_markdown(_display_table(numbered, head, fmt, method, level), fmt))
    return "\n\n".join(parts)


def _arrows(text: str) -> str:
    """Escaped text whose "->" never breaks across lines."""
    return text.replace("-&gt;", '<span class="nw">-&gt;</span>')


def claims_html(claims: Sequence[Claim], fmt: str = ".3f") -> str:
    """An HTML block: the summary and, per block (paper, extensions, setup checks), a table
    with a coloured verdict per claim. Laid out to fit a laptop window: fixed column shares,
    the effect's label above its numbers, long test descriptions wrapped (docs/reports.md,
    "The HTML report")."""
    claims = _corrected(claims)
    level = f"{round(100 * claims[0].level)}%" if claims else "95%"
    method = next((c.correction for c in claims if c.correction), CORRECTION)
    tables = []
    for heading, numbered, head in _blocks(claims):
        rows = []
        for i, c in numbered:
            label = (
                f'<span class="label">{html.escape(c.effect_label)}</span> '
                if c.effect_label
                else ""
            )
            shown = html.escape(replace(c, margin=None, noise=None).evidence(fmt))
            effect = label + f'<span class="num">{shown}</span>'
            if c.noise is not None:  # the interval with seed noise, then the band: own lines
                low, high, df = c.judged()
                if math.isfinite(low) and math.isfinite(high):
                    wide = f"[{format(low, '+' + fmt)}, {format(high, '+' + fmt)}]"
                    effect += (
                        f' <span class="margin">with seed noise <span class="nw">{wide}</span>, '
                        f"df {format_df(df)}</span>"
                    )
            if c.margin is not None:
                bound = (
                    f"±{format(c.margin, fmt)}"
                    if c.test_design == "equivalence"
                    else format(-c.expected_sign * c.margin, "+" + fmt)
                )
                effect += f' <span class="margin">{c.test_design} margin {bound}</span>'
            if c.context():
                effect += f' <span class="margin">{html.escape(c.context())}</span>'
            test = html.escape(f"{c.test_design}; {c.test}") + (
                f'<span class="source">{html.escape(c.source)}</span>' if c.source else ""
            )
            badge = html.escape(BADGE[c.verdict])
            why = f'<span class="why">{_arrows(html.escape(c.reason))}</span>' if c.reason else ""
            band = (  # what the verdict was judged with, under it
                f'<span class="why">{html.escape(c.noise.text(fmt))}</span>'
                if c.noise is not None
                else ""
            )
            rows.append(
                f'<tr class="claim {c.verdict.replace(" ", "-")}"><td>{i}</td>'
                f"<td>{_arrows(html.escape(c.statement))}{why}</td>"
                f'<td class="verdict"><span class="badge">{badge}</span>{band}</td>'
                f'<td class="effect">{effect}</td><td class="p">{html.escape(c.shown_p())}</td>'
                f'<td class="p">{html.escape(c.shown_p_adjusted())}</td>'
                f'<td class="n">{c.n}</td><td class="test">{test}</td></tr>'
            )
        columns = _display_table([], head, fmt, method, level).columns
        cols = "".join(f'<col class="c{i}">' for i in range(len(columns)))
        th = "".join(f"<th>{html.escape(h)}</th>" for h in columns)
        caption = f'<p class="block">{html.escape(heading)}</p>\n' if heading else ""
        tables.append(
            f'{caption}<div class="table-wrap"><table class="claims-table"><colgroup>{cols}'
            f"</colgroup>\n<thead><tr>{th}</tr></thead>\n<tbody>\n"
            + "\n".join(rows)
            + "\n</tbody>\n</table></div>"
        )
    return (
        f'<div class="claims"><p>{html.escape(verdict_summary(claims))}</p>\n'
        + "\n".join(tables)
        + "</div>"
    )

"""The papers polymnesia implements, as a reader of a report should see them cited: authors and
year (the docs and code name them by their number in ``shared/papers``, 000 to 004; a report
never does)."""

from __future__ import annotations

#: paper number -> how a report cites it
CITATIONS = {
    "000": "Aggarwal, Sathe and Sitaram 2024",
    "002": "the two-phase CFT paper, an anonymous ACL submission",
    "003": "Mao et al. 2022",
    "004": "Khelli et al. 2025",
}


def cite(paper: str) -> str:
    """The citation of paper ``"000"``..``"004"`` (001 is a summary of 000, cited as 000)."""
    return CITATIONS["000" if paper == "001" else paper]

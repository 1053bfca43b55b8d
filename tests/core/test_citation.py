"""CITATION.cff is valid Citation File Format 1.2 and names the package's own version."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_citation_file_matches_the_package() -> None:
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text(encoding="utf-8"))
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # (tomllib needs Python 3.11)
    project = dict(re.findall(r'^(version|license) = "([^"]+)"', text, flags=re.M))
    assert cff["cff-version"] == "1.2.0" and cff["type"] == "software"
    for key in ("message", "title", "authors", "version", "license"):
        assert cff.get(key), key
    assert str(cff["version"]) == project["version"]
    assert cff["license"] == project["license"]
    assert all("name" in a or "family-names" in a for a in cff["authors"])

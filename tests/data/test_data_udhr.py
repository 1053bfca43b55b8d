import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from polymnesia.data.sources import get_source
from polymnesia.data.sources.udhr import UDHRSource, udhr_languages
from polymnesia.errors import DataError

ROOT = Path(__file__).resolve().parents[2]


def _script_of(text: str) -> str:
    for ch in text:
        if ch.isalpha():
            return unicodedata.name(ch).split()[0]
    return ""


def test_at_least_45_languages_and_the_required_scripts():
    langs = udhr_languages()
    assert len(langs) >= 45
    src = UDHRSource()
    scripts = {
        _script_of(next(r for r in src.records(lang) if r.id == "a1.p1").text) for lang in langs
    }
    # unicodedata's first word: LATIN, CYRILLIC, GREEK, ARABIC, HEBREW, DEVANAGARI, BENGALI, THAI,
    # CJK (Han), HIRAGANA/KATAKANA (Japanese), HANGUL
    for script in (
        "LATIN",
        "CYRILLIC",
        "GREEK",
        "ARABIC",
        "HEBREW",
        "DEVANAGARI",
        "BENGALI",
        "THAI",
        "CJK",
        "HANGUL",
    ):
        assert script in scripts, script
    ja = next(r for r in src.records("ja") if r.id == "a1.p1").text
    assert any(unicodedata.name(c).startswith(("HIRAGANA", "KATAKANA")) for c in ja)


def test_every_bible_language_is_there():
    from polymnesia.data.sources.bible import DEFAULT_EDITIONS

    assert set(DEFAULT_EDITIONS) <= set(udhr_languages())


def test_ids_align_and_articles_complete():
    src = get_source("udhr")
    en = {r.id: r for r in src.records("en")}
    fr = {r.id: r for r in src.records("fr")}
    assert en["a1.p1"].text.startswith("All human beings are born free")
    assert fr["a1.p1"].text.startswith("Tous les êtres humains naissent libres")
    assert set(en) == set(fr)
    assert {r.meta["article"] for r in src.records("th")} == set(range(0, 31))
    assert en["a26.p3"].meta == {"article": 26, "split_group": "a26", "source_code": "eng"}
    assert en["pre.p1"].meta["split_group"] == "pre"


def test_files_are_compact_and_well_formed():
    folder = ROOT / "src" / "polymnesia" / "data" / "udhr"
    total = 0
    for path in folder.glob("*.json"):
        data = json.loads(path.read_text("utf-8"))
        assert data["code"] == path.stem and data["name"] and data["source_code"]
        assert all(p["text"].strip() for p in data["paragraphs"])
        total += path.stat().st_size
    assert total < 2_000_000


def test_unknown_language_and_subset():
    with pytest.raises(DataError, match="no language 'xx'; it has af, am,"):
        list(UDHRSource().records("xx"))
    assert UDHRSource(languages=["fr", "en"]).languages() == ["en", "fr"]
    with pytest.raises(DataError, match="no language 'zz'"):
        UDHRSource(languages=["zz"])


def test_extract_script_parses_a_declaration(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import extract_udhr
    finally:
        sys.path.pop(0)
    html = (
        "<html><body><header><h2>Preamble</h2><p>Whereas one,</p><p>Whereas  two.</p></header>"
        '<article data-number="1"><h2>Article 1</h2><p>First &amp; only.</p></article>'
        '<article data-number="2"><ol><li><p>A.</p></li><li><p>B.</p></li></ol></article>'
        "</body></html>"
    )
    assert extract_udhr.parse_declaration(html) == [
        {"id": "pre.p1", "text": "Whereas one, Whereas two."},
        {"id": "a1.p1", "text": "First & only."},
        {"id": "a2.p1", "text": "A."},
        {"id": "a2.p2", "text": "B."},
    ]
    assert (
        subprocess.run(
            [sys.executable, str(ROOT / "scripts" / "extract_udhr.py"), "--help"],
            capture_output=True,
        ).returncode
        == 0
    )

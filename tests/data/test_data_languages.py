import pytest

from polymnesia.data.languages import (
    LANGUAGES,
    Language,
    all_languages,
    get_language,
    level_of_class,
    parse_table,
    resource_level,
)
from polymnesia.data.sources.bible import BibleSource
from polymnesia.data.sources.udhr import UDHRSource
from polymnesia.errors import PolymnesiaError

TABLE6 = [
    "ar",
    "zh",
    "cs",
    "en",
    "et",
    "fi",
    "he",
    "hi",
    "it",
    "ru",
    "es",
    "sw",
    "ja",
    "fr",
    "pt",
    "nl",
    "se",
    "tr",
    "da",
    "no",
    "ko",
    "pl",
    "hu",
    "th",
    "mr",
    "gu",
    "af",
    "bg",
    "bn",
    "de",
    "id",
    "ml",
    "sv",
    "ta",
    "te",
    "ur",
    "vi",
    "tg",
    "ka",
    "sq",
    "ps",
    "sr",
    "az",
    "my",
    "co",
    "iw",
    "mn",
    "st",
    "sk",
    "ha",
]
MASSIVE = [
    "af",
    "am",
    "ar",
    "az",
    "bn",
    "ca",
    "cy",
    "da",
    "de",
    "el",
    "en",
    "es",
    "fa",
    "fi",
    "fr",
    "he",
    "hi",
    "hu",
    "hy",
    "id",
    "is",
    "it",
    "ja",
    "jv",
    "ka",
    "km",
    "kn",
    "ko",
    "lv",
    "ml",
    "mn",
    "ms",
    "my",
    "nb",
    "nl",
    "pl",
    "pt",
    "ro",
    "ru",
    "sl",
    "sq",
    "sv",
    "sw",
    "ta",
    "te",
    "th",
    "tl",
    "tr",
    "ur",
    "vi",
    "zh",
]


def test_every_source_language_is_in_the_table():
    for code in [*BibleSource().languages(), *UDHRSource().languages(), *TABLE6, *MASSIVE]:
        assert get_language(code).code == ("he" if code == "iw" else code)


def test_lookup_by_639_1_639_3_and_alias():
    ar = get_language("ar")
    assert ar == get_language("ara") == get_language("arb") == get_language("AR")
    assert ar.describe() == "Arabic · Arabic script · Afro-Asiatic/Semitic · Joshi 5"
    assert get_language("iw").name == "Hebrew"
    assert get_language("zh-Hant").code == "zh"
    assert get_language("ceb").code == "ceb" and get_language("ceb").iso639_1 == ""


def test_unknown_code_suggests():
    with pytest.raises(
        PolymnesiaError, match="unknown language code 'engl' \\(did you mean 'eng'\\?\\)"
    ) as exc:
        get_language("engl")
    assert "\n" not in str(exc.value)


def test_resource_levels():
    assert [level_of_class(c) for c in range(6)] == ["low", "low", "low", "mid", "high", "high"]
    assert (
        resource_level("en") == "high"
        and resource_level("th") == "mid"
        and resource_level("sw") == "low"
    )
    with pytest.raises(PolymnesiaError):
        level_of_class(6)


def test_table_is_consistent():
    langs = all_languages()
    assert len(langs) >= 100
    codes = [c for lang in langs for c in (lang.iso639_1, lang.iso639_3) if c]
    assert len(codes) == len(set(codes))
    assert all(len(lang.iso639_3) == 3 and len(lang.iso639_1) in (0, 2) for lang in langs)
    assert {
        "Latin",
        "Cyrillic",
        "Arabic",
        "Devanagari",
        "Bengali",
        "Han",
        "Japanese",
        "Hangul",
        "Greek",
        "Hebrew",
        "Thai",
    } <= {lang.script for lang in langs}
    assert LANGUAGES.get("fr").name == "French"
    entry = next(e for e in LANGUAGES if e.name == "ja")
    assert entry.description.startswith("Japanese · Japanese script · Japonic")


def test_parse_table_errors():
    good = (
        "iso639_1\tiso639_3\tname\tscript\tfamily\tbranch\tjoshi_class\n"
        "en\teng\tEnglish\tLatin\tIE\tGermanic\t5\n"
    )
    assert parse_table(good) == [Language("en", "eng", "English", "Latin", "IE", "Germanic", 5)]
    with pytest.raises(PolymnesiaError, match="columns"):
        parse_table("code\tname\n")
    with pytest.raises(PolymnesiaError, match="line 2 is malformed"):
        parse_table(good.replace("\t5", "\tfive"))

import json

import pytest

from polymnesia.data.sources import get_source
from polymnesia.data.sources.local import LocalSource
from polymnesia.errors import DataError


def test_txt_folder_line_aligned(tmp_path):
    (tmp_path / "en.txt").write_text("Hello\n\nGood night\n", encoding="utf-8")
    (tmp_path / "fr.txt").write_text("Bonjour\nx\nBonne nuit\n", encoding="utf-8")
    src = get_source("local", path=str(tmp_path))
    assert src.format == "txt" and src.languages() == ["en", "fr"]
    assert [(r.id, r.text) for r in src.records("en")] == [("1", "Hello"), ("3", "Good night")]
    assert [r.id for r in src.records("fr")] == ["1", "2", "3"]
    assert src.info()["records"] == {"en": 2, "fr": 3}


def test_jsonl_with_custom_fields(tmp_path):
    rows = [
        {"language": "de", "sentence": "Hallo", "y": 1, "key": "s1", "extra": 5},
        {"language": "en", "sentence": "Hi", "y": 0, "key": "s1"},
        {"language": "de", "sentence": "Tschüss"},
    ]
    path = tmp_path / "data.jsonl"
    path.write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n\n", encoding="utf-8"
    )
    src = LocalSource(
        str(path), text_field="sentence", lang_field="language", label_field="y", id_field="key"
    )
    assert src.languages() == ["de", "en"]
    de = list(src.records("de"))
    assert [(r.id, r.text, r.label) for r in de] == [
        ("s1", "Hallo", 1),
        ("data:3", "Tschüss", None),
    ]
    assert de[0].meta == {"extra": 5}


def test_jsonl_folder_auto(tmp_path):
    (tmp_path / "a.jsonl").write_text('{"lang": "en", "text": "a"}\n', encoding="utf-8")
    (tmp_path / "b.jsonl").write_text('{"lang": "en", "text": "b"}\n', encoding="utf-8")
    assert [r.text for r in LocalSource(str(tmp_path)).records("en")] == ["a", "b"]


@pytest.mark.parametrize(
    "content,match",
    [
        (
            '{"lang": "en", "text": "ok"}\n{"lang": "en", "text": \n',
            r"bad\.jsonl line 2: invalid JSON",
        ),
        ('{"lang": "en"}\n', r"bad\.jsonl line 1: missing string field 'text'"),
        ('{"text": "t"}\n', r"line 1: missing string field 'lang'"),
        ("[1, 2]\n", r"line 1: expected a JSON object, got list"),
        (
            '{"lang": "en", "text": "t", "label": "pos"}\n',
            r"line 1: field 'label' must be an integer",
        ),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path, content, match):
    (tmp_path / "bad.jsonl").write_text(content, encoding="utf-8")
    with pytest.raises(DataError, match=match) as exc:
        LocalSource(str(tmp_path)).languages()
    assert "\n" not in str(exc.value)


def test_path_errors(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        LocalSource(str(tmp_path / "nope"))
    with pytest.raises(DataError, match="holds no <lang>.txt or .jsonl"):
        LocalSource(str(tmp_path))
    (tmp_path / "notes.csv").write_text("x", encoding="utf-8")
    with pytest.raises(DataError, match="is a file; give a .jsonl file or a folder"):
        LocalSource(str(tmp_path / "notes.csv"))
    with pytest.raises(DataError, match="format must be one of auto, txt, jsonl"):
        LocalSource(str(tmp_path), format="csv")  # type: ignore[arg-type]


def test_unreadable_and_unknown_language(tmp_path):
    (tmp_path / "en.txt").write_bytes(b"\xff\xfe\xfa bad utf-8")
    src = LocalSource(str(tmp_path))
    with pytest.raises(DataError, match=r"cannot read .*en\.txt: UnicodeDecodeError"):
        list(src.records("en"))
    with pytest.raises(DataError, match="no language 'fr'; it has en"):
        list(src.records("fr"))

"""The local source: empty files, misaligned files and repeated ids give one clear line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polymnesia.cli.main import main
from polymnesia.data.sources import get_source, local
from polymnesia.errors import DataError


def _txt(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(exist_ok=True)
    for lang, text in files.items():
        (folder / f"{lang}.txt").write_text(text, encoding="utf-8")
    return folder


#: (files, options, message of the DataError)
BAD = [
    ({"en": "a\nb\n", "fr": ""}, {}, "fr.txt holds no text"),
    ({"en": "a\nb\n", "fr": "\n  \n"}, {}, "holds no text (language 'fr')"),
    ({"en": "a\nb\nc\n", "fr": "x\ny\n"}, {"aligned": True}, "differ in line count (en 3, fr 2)"),
]


@pytest.mark.parametrize(("files", "options", "message"), BAD)
def test_bad_txt_folders(tmp_path, files, options, message):  # type: ignore[no-untyped-def]
    src = get_source("local", path=str(_txt(tmp_path / "d", files)), **options)
    with pytest.raises(DataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        list(src.records("en"))


def test_misaligned_files_say_how_they_are_aligned(tmp_path, capsys):  # type: ignore[no-untyped-def]
    folder = _txt(tmp_path / "d", {"en": "a\nb\nc\n", "fr": "x\ny\n"})
    auto = [r.id for r in get_source("local", path=str(folder)).records("fr")]
    err = capsys.readouterr().err
    assert auto == ["1", "2"] and "line counts differ (en 3, fr 2)" in err
    assert "aligned by line number" in err and len(err.strip().splitlines()) == 1
    apart = [r.id for r in get_source("local", path=str(folder), aligned=False).records("fr")]
    assert apart == ["fr:1", "fr:2"] and not capsys.readouterr().err


def test_jsonl_records_sharing_one_id(tmp_path):  # type: ignore[no-untyped-def]
    path = tmp_path / "d.jsonl"
    rows = [{"lang": "en", "text": f"t{i}", "id": "same"} for i in range(4)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match="id 'same' is given to 4 records of language 'en'"):
        list(get_source("local", path=str(path)).records("en"))


def test_unknown_option_names_the_accepted_ones(tmp_path):  # type: ignore[no-untyped-def]
    with pytest.raises(
        DataError,
        match=r"unknown key 'options.alinged' \(did you mean 'aligned'\?\).*accepted: path, format",
    ):
        get_source("local", path=str(tmp_path), alinged=True)


QUICK = str(Path(__file__).resolve().parents[2] / "configs" / "quickstart.yaml")
TWO_GROUPS = ["--set=groups={pretraining: [en], adapting: [fr]}"]


def _validate(path: Path, capsys) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    code = main(
        ["validate", QUICK, "--set=data.source=local", f"--set=data.options.path={path}"]
        + TWO_GROUPS
    )
    return code, capsys.readouterr().err.strip()


def test_validate_refuses_a_group_language_the_local_corpus_lacks(tmp_path, capsys):  # type: ignore[no-untyped-def]
    code, err = _validate(_txt(tmp_path / "corpus", {"en": "a\n", "de": "b\n"}), capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "source 'local' has no language 'fr'; it has de, en" in err


def test_validate_reads_a_small_jsonl_corpus_and_refuses_a_string_label(tmp_path, capsys):  # type: ignore[no-untyped-def]
    path = tmp_path / "corpus.jsonl"
    rows = [{"lang": "en", "text": "a", "label": 1}, {"lang": "fr", "text": "b", "label": "pos"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code, err = _validate(path, capsys)
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "corpus.jsonl line 2: field 'label' must be an integer, got 'pos'" in err


def test_a_large_jsonl_corpus_is_left_to_its_data_stage(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    path = tmp_path / "corpus.jsonl"
    path.write_text(json.dumps({"lang": "en", "text": "a"}) + "\n", encoding="utf-8")
    assert get_source("local", path=str(path)).known_languages() == ["en"]
    monkeypatch.setattr(local, "READ_AT_VALIDATION", 4)
    assert get_source("local", path=str(path)).known_languages() is None

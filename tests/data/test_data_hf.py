import os
import subprocess
import sys

import pytest

from polymnesia.data.sources import hf
from polymnesia.data.sources.hf import HFSource
from polymnesia.errors import DataError


def test_offline_mode_gives_one_line(tmp_path):
    # huggingface_hub reads HF_HUB_OFFLINE at import time, so run in a fresh process
    code = (
        "from polymnesia.data.sources.hf import HFSource\n"
        "from polymnesia.errors import DataError\n"
        "try:\n"
        "    HFSource('polymnesia/does-not-exist', lang_field='lang').languages()\n"
        "except DataError as e:\n"
        "    print(e)\n"
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    msg = proc.stdout.strip()
    assert "Hugging Face Hub is unreachable for dataset 'polymnesia/does-not-exist'" in msg
    assert "bible" in msg and "udhr" in msg and "local" in msg and "\n" not in msg


def test_connection_error_gives_one_line(monkeypatch):
    import datasets

    def unreachable(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'x' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", unreachable)
    src = HFSource("org/x", languages={"fr": "fr-FR"})
    assert src.languages() == ["fr"]
    with pytest.raises(
        DataError,
        match=r"unreachable for dataset 'org/x' \(config 'fr-FR'\); sources that work offline",
    ):
        list(src.records("fr"))


def test_other_errors_are_one_line(monkeypatch):
    import datasets

    def missing(*args, **kwargs):
        raise ValueError("BuilderConfig 'zz' not found.\nAvailable: ['a', 'b']")

    monkeypatch.setattr(datasets, "load_dataset", missing)
    with pytest.raises(
        DataError,
        match=r"cannot load Hugging Face dataset 'org/x' split 'train': BuilderConfig 'zz' not "
        r"found\.$",
    ):
        HFSource("org/x", lang_field="lang").languages()


def _fake(rows_by_config):
    import datasets

    calls = []

    def load(name, config=None, split="train", **kwargs):
        calls.append((name, config, split))
        return datasets.Dataset.from_list(rows_by_config[config])

    return load, calls


def test_language_column(monkeypatch):
    import datasets

    rows = [
        {"lang": "en", "text": "a", "label": 1, "uid": "q1"},
        {"lang": "fr", "text": "b", "label": 0, "uid": "q1"},
        {"lang": "en", "text": "c", "label": 0, "uid": "q2"},
    ]
    load, calls = _fake({None: rows})
    monkeypatch.setattr(datasets, "load_dataset", load)
    src = HFSource("org/x", lang_field="lang", label_field="label", id_field="uid")
    assert src.languages() == ["en", "fr"]
    assert [(r.id, r.text, r.label) for r in src.records("en")] == [("q1", "a", 1), ("q2", "c", 0)]
    assert len(calls) == 1  # loaded once
    with pytest.raises(DataError, match="no language 'de'; it has en, fr"):
        list(src.records("de"))


def test_per_language_configs_and_column_check(monkeypatch):
    import datasets

    load, calls = _fake({"de-DE": [{"utt": "Hallo"}, {"utt": "Welt"}]})
    monkeypatch.setattr(datasets, "load_dataset", load)
    src = HFSource("org/m", languages={"de": "de-DE"}, text_field="utt", split="test")
    assert [(r.id, r.text) for r in src.records("de")] == [("0", "Hallo"), ("1", "Welt")]
    assert calls == [("org/m", "de-DE", "test")]
    bad = HFSource("org/m", languages={"de": "de-DE"}, text_field="sentence")
    with pytest.raises(DataError, match="has no column 'sentence'; it has utt"):
        list(bad.records("de"))


def test_needs_languages_or_lang_field():
    with pytest.raises(DataError, match="needs languages"):
        HFSource("org/x")
    assert hf._unreachable(TimeoutError()) and not hf._unreachable(ValueError())


class _Rows(list):
    """A stand-in for a datasets.Dataset: rows, and columns by name."""

    column_names = ["id", "context", "question", "answers", "tokens", "ner_tags"]

    def __getitem__(self, key):
        return [r[key] for r in self] if isinstance(key, str) else super().__getitem__(key)


def test_field_mapping_lang_pattern_and_word_lists(monkeypatch):
    """meta_fields copies columns into meta, lang_pattern reads the language from a column
    (TyDiQA ids), a list-of-words text column is joined (PAN-X tokens)."""
    import datasets

    rows = _Rows(
        [
            {
                "id": "english-1",
                "context": "Paris is big.",
                "question": "what?",
                "answers": {"text": ["Paris"], "answer_start": [0]},
                "tokens": ["a", "b"],
                "ner_tags": [0, 1],
            },
            {
                "id": "russian-2",
                "context": "Москва",
                "question": "что?",
                "answers": {"text": ["Москва"], "answer_start": [0]},
                "tokens": ["c"],
                "ner_tags": [2],
            },
        ]
    )
    monkeypatch.setattr(datasets, "load_dataset", lambda *a, **k: rows)
    src = HFSource(
        "org/tydi",
        text_field="context",
        id_field="id",
        lang_field="id",
        lang_pattern=r"^([a-z]+)-",
        languages={"en": "english", "ru": "russian"},
        meta_fields={"question": "question", "answers": "answers"},
    )
    assert src.languages() == ["en", "ru"]
    (rec,) = list(src.records("ru"))
    assert rec.text == "Москва" and rec.meta["question"] == "что?"
    assert rec.meta["answers"]["answer_start"] == [0]
    ner = HFSource(
        "org/panx",
        text_field="tokens",
        lang_field="id",
        lang_pattern=r"^([a-z]+)-",
        meta_fields={"tags": "ner_tags"},
    )
    first = next(iter(ner.records("english")))
    assert first.text == "a b" and first.meta["tags"] == [0, 1]


def test_lang_pattern_needs_one_group():
    from polymnesia.errors import ConfigError

    with pytest.raises(ConfigError, match="one group"):
        HFSource.check_options({"lang_pattern": "(a)(b)"}, "data.options")
    with pytest.raises(ConfigError, match="lang_pattern"):
        HFSource.check_options({"lang_pattern": "("}, "data.options")


def test_meta_fields_are_copied_into_meta(monkeypatch):
    import datasets

    rows = {"fr-FR": [{"utt": "réveille moi", "annot_utt": "réveille [person : moi]", "id": "1"}]}
    load, _ = _fake(rows)
    monkeypatch.setattr(datasets, "load_dataset", load)
    src = HFSource(
        "org/massive",
        languages={"fr": "fr-FR"},
        text_field="utt",
        id_field="id",
        meta_fields=["annot_utt"],
    )
    (rec,) = list(src.records("fr"))
    assert rec.text == "réveille moi" and rec.meta["annot_utt"] == "réveille [person : moi]"
    bad = HFSource("org/massive", languages={"fr": "fr-FR"}, text_field="utt", meta_fields=["x"])
    with pytest.raises(DataError, match="has no column 'x'"):
        list(bad.records("fr"))

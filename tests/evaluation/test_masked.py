"""Masked-LM loss (Mao et al. 2022's F_p for encoders) on hand-checkable models and a tiny XLM-R."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from polymnesia.errors import PolymnesiaError
from polymnesia.evaluation.masked import (
    encode_for_masking,
    mask_count,
    mask_positions,
    masked_nll,
    mlm_items,
)
from polymnesia.testing import corpus, special_ids, tiny_bpe, tiny_model, tiny_sentencepiece


class Logits(torch.nn.Module):
    """A 'model' whose logits at position l put ``peak`` on token ``l + 3`` (zero elsewhere);
    it records the inputs it sees."""

    def __init__(self, vocab: int, peak: float) -> None:
        super().__init__()
        self.vocab, self.peak = vocab, peak
        self.dummy = torch.nn.Parameter(torch.zeros(1))
        self.seen: list[torch.Tensor] = []

    def forward(self, input_ids, attention_mask=None):  # type: ignore[no-untyped-def]
        self.seen.append(input_ids.clone())
        b, length = input_ids.shape
        logits = torch.zeros(b, length, self.vocab)
        logits[:, torch.arange(length), torch.arange(length) + 3] = self.peak

        class Out:
            pass

        out = Out()
        out.logits = logits  # type: ignore[attr-defined]
        return out


@pytest.fixture(scope="module")
def xlmr():  # type: ignore[no-untyped-def]
    tok, _ = tiny_sentencepiece(corpus(("en", "fr")), 300, "unigram")
    return tok, tiny_model("xlm-roberta", len(tok), **special_ids(tok)).eval()  # no dropout


def test_mask_count_is_fifteen_percent_rounded_and_at_least_one() -> None:
    assert [mask_count(n) for n in (0, 1, 3, 7, 10, 20, 100)] == [0, 1, 1, 1, 2, 3, 15]
    assert mask_count(10, rate=0.5) == 5


def test_mask_positions_depend_only_on_seed_and_text() -> None:
    a = mask_positions("In the beginning", 40)
    assert a == mask_positions("In the beginning", 40)  # deterministic
    assert len(a) == 6 and a == sorted(set(a)) and all(0 <= i < 40 for i in a)
    assert mask_positions("In the beginning", 40, seed=1) != a
    assert mask_positions("In the beginning.", 40) != a
    assert mask_positions("x", 0) == [] and mask_positions("x", 1) == [0]


def test_only_masked_positions_are_scored_and_replaced() -> None:
    seqs = [[0, 3, 4, 5, 6, 2], [0, 3, 4, 2], [0, 3, 4, 5, 2]]
    masked = [[1, 3], [2], [1, 2, 3]]
    model = Logits(vocab=12, peak=0.0)  # uniform: each scored token costs ln 12
    nll, count = masked_nll(model, seqs, masked, pad_id=1, mask_id=11, batch_size=2)
    assert count == [2, 1, 3]
    assert nll == pytest.approx([2 * math.log(12), math.log(12), 3 * math.log(12)])
    seen = {tuple(r[r != 1].tolist()) for batch in model.seen for r in batch}  # pads dropped
    assert seen == {(0, 11, 4, 11, 6, 2), (0, 3, 11, 2), (0, 11, 11, 11, 2)}


def test_a_model_that_predicts_every_token_scores_zero() -> None:
    seqs = [[3, 4, 5, 6, 7, 8], [3, 4, 5]]  # token l + 3 at position l: what Logits predicts
    nll, count = masked_nll(
        Logits(vocab=12, peak=60.0), seqs, [[1, 4], [2]], pad_id=1, mask_id=11, batch_size=4
    )
    assert count == [2, 1] and nll == pytest.approx([0.0, 0.0], abs=1e-12)
    wrong, _ = masked_nll(  # one position off: the scored token is not the predicted one
        Logits(vocab=12, peak=60.0), [[4, 5, 6]], [[1]], pad_id=1, mask_id=11, batch_size=4
    )
    assert wrong[0] > 50


def test_special_tokens_are_never_candidates_and_truncation_keeps_them(xlmr) -> None:  # type: ignore[no-untyped-def]
    tok, _ = xlmr
    texts = ["In the beginning God created the heaven and the earth.", "Jesus wept."]
    seqs, cands, nbytes = encode_for_masking(tok, texts, max_length=16)
    for ids, cand in zip(seqs, cands, strict=True):
        assert len(ids) <= 16 and ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id
        assert cand == list(range(1, len(ids) - 1))
    assert nbytes[0] < len(texts[0].encode()) and nbytes[1] == len(texts[1].encode())


def test_equals_a_manual_per_text_computation(xlmr) -> None:  # type: ignore[no-untyped-def]
    tok, model = xlmr
    texts = corpus(("en", "fr"))[:5] + ["Jésus pleura.", "a"]
    _, cols = mlm_items(model, tok, texts, batch_size=3, max_length=48)
    for i, text in enumerate(texts):
        ids = tok(text, truncation=True, max_length=48)["input_ids"]
        pos = [1 + j for j in mask_positions(text, len(ids) - 2)]
        inp = torch.tensor([ids])
        inp[0, pos] = tok.mask_token_id
        with torch.no_grad():
            logits = model(input_ids=inp).logits[0, pos]  # full logits, one text, no padding
        want = F.cross_entropy(logits, torch.tensor(ids)[pos], reduction="sum").item()
        assert cols["tokens"][i] == len(pos) >= 1
        assert cols["nll"][i] == pytest.approx(want, rel=1e-5)


def test_scores_do_not_depend_on_batching_or_order(xlmr) -> None:  # type: ignore[no-untyped-def]
    tok, model = xlmr
    texts = corpus(("en", "fr"))[:8]
    st, cols = mlm_items(model, tok, texts, batch_size=8, max_length=64)
    _, one = mlm_items(model, tok, texts, batch_size=1, max_length=64)
    _, rev = mlm_items(model, tok, texts[::-1], batch_size=3, max_length=64, max_tokens=100)
    assert one["nll"] == pytest.approx(cols["nll"], rel=1e-5)
    assert rev["nll"][::-1] == pytest.approx(cols["nll"], rel=1e-5)
    assert st.tokens == sum(cols["tokens"]) and st.loss == pytest.approx(
        sum(cols["nll"]) / st.tokens
    )
    assert 0.5 * math.log(len(tok)) < st.loss < 2 * math.log(len(tok))  # a random model


def test_a_tokenizer_without_mask_token_is_refused_in_one_line() -> None:
    tok = tiny_bpe(["a b c"] * 5, 280)
    with pytest.raises(PolymnesiaError, match="needs a tokenizer with a mask token") as e:
        mlm_items(Logits(len(tok), 0.0), tok, ["a b"])
    assert "\n" not in str(e.value)

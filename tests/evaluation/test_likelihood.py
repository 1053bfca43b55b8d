"""Likelihood evaluation on hand-checkable models."""

from __future__ import annotations

import math

import pytest
import torch

from polymnesia.evaluation.likelihood import LMStats, length_batches, sequence_nll


class Uniform(torch.nn.Module):
    """A 'model' whose logits are all zero: every token has probability 1/V."""

    def __init__(self, vocab: int) -> None:
        super().__init__()
        self.vocab = vocab
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask=None):  # type: ignore[no-untyped-def]
        class Out:
            pass

        out = Out()
        out.logits = torch.zeros(*input_ids.shape, self.vocab)  # type: ignore[attr-defined]
        return out


def test_uniform_model_nll_is_log_vocab_per_predicted_token():
    seqs = [[1, 5, 6, 7], [1, 9], [1, 2, 3]]
    nll, count = sequence_nll(Uniform(10), seqs, pad_id=0, batch_size=2, max_tokens=100)
    assert count == [3, 1, 2]  # BOS is never predicted, padding never counted
    assert nll == pytest.approx([3 * math.log(10), math.log(10), 2 * math.log(10)])


def test_stats_formulas():
    st = LMStats(nll=6 * math.log(2), tokens=3, bytes=2, words=1)
    assert st.bits_per_byte == pytest.approx(3.0)  # 6 bits over 2 bytes
    assert st.perplexity == pytest.approx(4.0)  # exp(2 ln 2)
    assert st.word_perplexity == pytest.approx(64.0)


def test_length_batches_respect_token_budget_and_cover_all():
    lengths = [5, 1, 9, 3, 3, 8]
    batches = length_batches(lengths, batch_size=3, max_tokens=12)
    assert sorted(i for b in batches for i in b) == list(range(6))
    for b in batches:
        assert len(b) <= 3 and len(b) * max(lengths[i] for i in b) <= 12 or len(b) == 1


def test_length_batches_cut_where_padding_would_pass_its_share():
    # sorted: 2, 2, 3, 10, 10, 11; 2+2+3 padded to 9 is 7 real (+29%): cut at 10% but not at 50%
    lengths = [10, 2, 11, 2, 3, 10]
    assert length_batches(lengths, 64, 10**6, max_padding=0.1) == [[1, 3], [4], [0, 5, 2]]
    assert length_batches(lengths, 64, 10**6, max_padding=0.5) == [[1, 3, 4], [0, 5, 2]]
    assert length_batches(lengths, 64, 10**6, max_padding=10.0) == [[1, 3, 4, 0, 5, 2]]


def test_head_on_valid_positions_matches_full_logits():
    from polymnesia.evaluation.likelihood import _token_nll
    from polymnesia.testing import tiny_model

    model = tiny_model("mistral", 50, hidden_size=32, intermediate_size=64).eval()
    ids = torch.tensor([[1, 5, 7, 9, 3], [1, 4, 0, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]])
    with torch.no_grad():
        fast = _token_nll(model, ids, mask)
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]
        full = (
            torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
            * mask[:, 1:]
        )
    torch.testing.assert_close(fast, full, rtol=1e-5, atol=1e-5)


def test_head_nll_in_chunks_equals_one_pass_and_hand_values():
    from polymnesia.evaluation.likelihood import head_nll
    from polymnesia.runtime import logit_chunk_rows

    head = torch.nn.Linear(2, 3, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]))
    hidden = torch.tensor([[0.0, 0.0], [math.log(2), 0.0], [0.0, 0.0], [0.0, math.log(3)]])
    targets = torch.tensor([0, 0, 2, 1])
    # logits [0,0,0] -> ln 3; [ln2,0,0] -> p(0) = 2/4; [0,ln3,0] -> p(1) = 3/5
    expected = torch.tensor([math.log(3), math.log(2), math.log(3), math.log(5 / 3)])
    for rows in (1, 3, 4, 100):
        torch.testing.assert_close(head_nll(head, hidden, targets, rows), expected)
    torch.testing.assert_close(head_nll(head, hidden, targets), expected)
    # the chunk is sized by the device's byte budget (4 MiB of float32 logits on a CPU, 256 MiB
    # on an accelerator), never below 256 positions
    assert logit_chunk_rows(2000, "cpu") == 524 and logit_chunk_rows(32_000, "cpu") == 256
    assert logit_chunk_rows(32_000, "cuda") == 2097 and logit_chunk_rows(10**7, "cuda") == 256


def test_head_nll_chunking_changes_no_score_of_a_model():
    from polymnesia.evaluation.likelihood import head_nll
    from polymnesia.testing import tiny_model

    model = tiny_model("mistral", 50, hidden_size=32, intermediate_size=64).eval()
    hidden = torch.randn(37, 32)
    targets = torch.randint(0, 50, (37,))
    with torch.no_grad():
        whole = head_nll(model.lm_head, hidden, targets, rows=37)
        for rows in (1, 5, 36):
            # the same values up to float rounding of the matrix products (row blocks differ)
            chunked = head_nll(model.lm_head, hidden, targets, rows=rows)
            torch.testing.assert_close(chunked, whole, rtol=1e-6, atol=1e-6)

"""Accuracy, macro-F1 and BIO span F1 on hand-checked examples."""

import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.classification import accuracy, bio_spans, macro_f1, span_f1


def test_accuracy_and_macro_f1_by_hand():
    pred, gold = [0, 1, 1, 2], [0, 1, 2, 2]
    assert accuracy(pred, gold) == pytest.approx(3 / 4)
    # F1 per label: 0 -> 1, 1 -> 2*1/(2+1), 2 -> 2*1/(1+2)
    assert macro_f1(pred, gold) == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)
    # label 3 never appears: F1 0 counts in the mean
    assert macro_f1(pred, gold, n_labels=4) == pytest.approx((1 + 2 / 3 + 2 / 3) / 4)
    assert macro_f1(["a", "b"], ["a", "b"]) == 1.0


def test_bio_spans_conlleval_rules():
    assert bio_spans(["B-PER", "I-PER", "O", "B-LOC", "I-ORG", "O"]) == {
        ("PER", 0, 2),
        ("LOC", 3, 4),
        ("ORG", 4, 5),  # I- of another type starts a new span
    }
    assert bio_spans(["O", "I-MISC", "I-MISC"]) == {("MISC", 1, 3)}  # lenient start
    assert bio_spans(["B-X", "B-X", "I-X"]) == {("X", 0, 1), ("X", 1, 3)}
    assert bio_spans(["O", "O"]) == set()


def test_span_f1_by_hand():
    pred = [["B-PER", "I-PER", "O", "B-LOC", "I-ORG", "O"], ["O"]]
    gold = [["B-PER", "I-PER", "O", "B-LOC", "I-LOC", "O"], ["O"]]
    # TP = 1 (PER 0-2); 3 predicted, 2 gold spans
    assert span_f1(pred, gold) == pytest.approx(2 * 1 / (3 + 2))
    assert span_f1(gold, gold) == 1.0
    assert span_f1([["O"]], [["O"]]) == 0.0


def test_bad_inputs():
    with pytest.raises(PolymnesiaError, match="equal-length"):
        accuracy([1, 2], [1])
    with pytest.raises(PolymnesiaError, match="not BIO"):
        bio_spans(["E-PER"])
    with pytest.raises(PolymnesiaError, match="sentence 0"):
        span_f1([["O"]], [["O", "O"]])

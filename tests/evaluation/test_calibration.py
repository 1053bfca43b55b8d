"""Zero-shot answer scoring: raw, length-normalised, domain PMI, contextual calibration."""

from __future__ import annotations

import math

import numpy as np
import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.evaluation.calibration import (
    CONTENT_FREE,
    answer_prior,
    contextual_prior,
    score_answers,
)
from polymnesia.evaluation.generation import answer_logprobs, chat_prompt


def test_raw_and_length_normalised_by_hand() -> None:
    lp = [-6.0, -4.0]
    np.testing.assert_allclose(score_answers(lp, "raw"), lp)
    # "law": 3 characters, "wisdom": 6 -> -2 and -2/3: the longer answer wins both ways here
    np.testing.assert_allclose(
        score_answers(lp, "length_normalised", answers=["law", "wisdom"]), [-2.0, -4 / 6]
    )
    # -9 over 9 characters beats -4 over 3: normalisation flips the choice
    s = score_answers([-9.0, -4.0], "length_normalised", answers=["prophets!", "law"])
    assert s.argmax() == 0 and np.argmax([-9.0, -4.0]) == 1


def test_pmi_subtracts_the_domain_prior_and_can_flip_the_answer() -> None:
    # raw prefers answer 1 (-3 > -5) only because it is a priori likely (-1 vs -6)
    s = score_answers([-5.0, -3.0], "pmi", prior=[-6.0, -1.0])
    np.testing.assert_allclose(s, [1.0, -2.0])
    assert s.argmax() == 0


def test_contextual_prior_by_hand() -> None:
    # content-free rows: (0.2, 0.8) and uniform -> p_cf = (0.35, 0.65)
    rows = [[math.log(0.2), math.log(0.8)], [-7.0, -7.0]]
    np.testing.assert_allclose(np.exp(contextual_prior(rows)), [0.35, 0.65])
    # p(.|x) = (0.4, 0.6): calibrated ratio 0.4/0.35 > 0.6/0.65 -> answer 0
    prior = contextual_prior(rows)
    s = score_answers([math.log(0.4), math.log(0.6)], "contextual", prior=prior)
    assert s.argmax() == 0
    np.testing.assert_allclose(s, [math.log(0.4 / 0.35), math.log(0.6 / 0.65)])


def test_bad_scoring_inputs_are_one_line() -> None:
    with pytest.raises(PolymnesiaError, match="scoring must be one of raw, length_normalised"):
        score_answers([0.0], "acc_norm")  # type: ignore[arg-type]
    with pytest.raises(PolymnesiaError, match="needs a prior with one value per answer"):
        score_answers([0.0, 1.0], "pmi")
    with pytest.raises(PolymnesiaError, match="one non-empty answer per score"):
        score_answers([0.0, 1.0], "length_normalised", answers=["a"])


@pytest.fixture(scope="module")
def tok_model(make_tok_model):  # type: ignore[no-untyped-def]
    return make_tok_model(["the cat sat on the mat", "law history wisdom prophets"])


def test_answer_prior_runs_the_model_on_the_domain_and_content_free_prompts(tok_model) -> None:  # type: ignore[no-untyped-def]
    tok, model = tok_model
    q, answers = "Which genre is this verse?", ["law", "wisdom", "prophets"]
    assert answer_prior(model, tok, q, answers, "raw") is None
    pmi = answer_prior(model, tok, q, answers, "pmi")
    np.testing.assert_allclose(pmi, answer_logprobs(model, tok, chat_prompt(q), answers))
    rows = [answer_logprobs(model, tok, chat_prompt(q, cf), answers) for cf in CONTENT_FREE]
    ctx = answer_prior(model, tok, q, answers, "contextual")
    np.testing.assert_allclose(ctx, contextual_prior(rows))
    assert np.exp(ctx).sum() == pytest.approx(1.0)

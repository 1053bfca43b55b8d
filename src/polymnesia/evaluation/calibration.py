"""Scoring the candidate answers of a zero-shot question, raw or calibrated.

Small models answer a multiple-choice question with the same candidate for
every input when answers are ranked by raw likelihood: the ranking reflects
how likely each answer string is a priori (its length, its frequency, the
model's genre bias), not the input. Four scorings of candidate ``a`` for
input ``x`` (``log p`` = summed log-probability of the answer tokens and
``<|im_end|>`` after the prompt, :func:`polymnesia.evaluation.generation.answer_logprobs`):

* ``raw``: ``log p(a | x)`` (lm-evaluation-harness's ``acc``).
* ``length_normalised``: ``log p(a | x) / len(a)``, the answer's length in
  characters (comparable across tokenizers, unlike a token count).
* ``pmi``: domain-conditional PMI (Holtzman et al. 2021, "Surface Form
  Competition", eq. 3): ``log p(a | x) - log p(a | x_domain)``, with
  ``x_domain`` the same prompt with the question but without the input.
* ``contextual``: contextual calibration (Zhao et al. 2021, "Calibrate
  Before Use", section 5): the answer distribution for content-free inputs
  (``"N/A"``, ``""``, ``"[MASK]"`` in place of the input, each normalised over
  the candidates, then averaged) is ``p_cf``; the calibrated probabilities
  are ``diag(p_cf)^-1 p(. | x)`` renormalised, i.e. the prediction maximises
  ``log p(a | x) - log p_cf(a)``. Departure: Zhao et al. use the first
  token's probability of each label; multi-token answers here use the whole
  answer's probability.

The maths (:func:`score_answers`, :func:`contextual_prior`) are pure
functions; :func:`answer_prior` runs the model for the baselines.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from polymnesia.errors import PolymnesiaError
from polymnesia.evaluation.generation import answer_logprobs, chat_prompt

Scoring = Literal["raw", "length_normalised", "pmi", "contextual"]
SCORINGS: tuple[Scoring, ...] = ("raw", "length_normalised", "pmi", "contextual")
CONTENT_FREE = ("N/A", "", "[MASK]")  # Zhao et al. 2021's content-free inputs


def _check(scoring: str) -> None:
    if scoring not in SCORINGS:
        raise PolymnesiaError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")


def contextual_prior(cf_logprobs: npt.ArrayLike) -> np.ndarray:
    """``log p_cf`` [K] from ``cf_logprobs[c, k] = log p(a_k | content-free input c)``.

    Each row is normalised over the K candidates (softmax), the rows are
    averaged, and the log is returned (Zhao et al. 2021).
    """
    lp = np.atleast_2d(np.asarray(cf_logprobs, dtype=np.float64))
    probs = np.exp(lp - lp.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    return np.asarray(np.log(probs.mean(axis=0)))


def score_answers(
    logprobs: npt.ArrayLike,
    scoring: Scoring,
    *,
    answers: Sequence[str] | None = None,
    prior: npt.ArrayLike | None = None,
) -> np.ndarray:
    """Scores [K] of the K candidates from ``logprobs[k] = log p(a_k | x)``; argmax is the answer.

    ``answers`` (the candidate strings) are needed for ``length_normalised``;
    ``prior`` [K] for ``pmi`` (``log p(a | x_domain)``) and ``contextual``
    (:func:`contextual_prior`).
    """
    _check(scoring)
    lp = np.asarray(logprobs, dtype=np.float64)
    if scoring == "raw":
        return lp
    if scoring == "length_normalised":
        if answers is None or len(answers) != len(lp) or any(not a for a in answers):
            raise PolymnesiaError("length_normalised scoring needs one non-empty answer per score")
        return lp / np.array([len(a) for a in answers], dtype=np.float64)
    if prior is None or np.shape(prior) != lp.shape:
        raise PolymnesiaError(f"{scoring} scoring needs a prior with one value per answer")
    return lp - np.asarray(prior, dtype=np.float64)


def answer_prior(
    model: Any, tokenizer: Any, question: str, answers: Sequence[str], scoring: Scoring
) -> np.ndarray | None:
    """The per-answer baseline ``scoring`` subtracts (None for raw and length_normalised).

    ``pmi``: ``log p(a | question alone)`` (the chat prompt without the input);
    ``contextual``: :func:`contextual_prior` over :data:`CONTENT_FREE` inputs.
    """

    _check(scoring)
    if scoring == "pmi":
        return np.asarray(
            answer_logprobs(model, tokenizer, chat_prompt(question, tokenizer=tokenizer), answers)
        )
    if scoring == "contextual":
        rows = [  # "" leaves the input out, as the pmi prompt does
            answer_logprobs(model, tokenizer, chat_prompt(question, cf, tokenizer), answers)
            for cf in CONTENT_FREE
        ]
        return contextual_prior(rows)
    return None

"""Language-modelling scores from summed negative log-likelihoods (natural log, nats).

Aggarwal et al. 2024 (Table 1) compares perplexity across models whose vocabularies
differ (a 48,000-token adapted model against a 32,000-token base); per-token
perplexity is then not comparable, per-byte or per-word scores are
(lm-evaluation-harness reports word perplexity, byte perplexity and bits per
byte the same way). Mao et al. 2022 (section 3.1) defines forgetting on the
pre-training loss.
"""

from __future__ import annotations

import math

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.base import ratio_of, register_metric


def _per_unit(nll_sum: float, n: float, unit: str) -> float:
    if n <= 0:
        raise PolymnesiaError(f"number of {unit} must be positive, got {n}")
    if not math.isfinite(nll_sum):
        raise PolymnesiaError(f"summed negative log-likelihood must be finite, got {nll_sum}")
    return float(nll_sum) / n


def exp_or_inf(x: float) -> float:
    """``exp(x)``, or ``inf`` where it overflows a float (x > ~709.78).

    A model whose loss blew up has a mean NLL in the thousands; its perplexity
    is reported as infinite rather than ending the run with an OverflowError.
    """
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


@register_metric(
    "perplexity",
    higher_is_better=False,
    description="exp(NLL sum / tokens), per-token perplexity",
    title="token perplexity",
    items={"lm": ratio_of("nll", "tokens", exp=True, name="perplexity")},
)
def perplexity(nll_sum: float, n_tokens: int) -> float:
    """Token perplexity ``exp(sum_i -log p(x_i) / n_tokens)``; only comparable under one
    tokenizer.
    """
    return exp_or_inf(_per_unit(nll_sum, n_tokens, "tokens"))


@register_metric(
    "bits_per_byte",
    higher_is_better=False,
    description="NLL sum in nats / (UTF-8 bytes * ln 2); tokenizer-independent",
    title="bits per byte",
    items={"lm": ratio_of("nll", "bytes", scale=1 / math.log(2), name="bits_per_byte")},
)
def bits_per_byte(nll_sum_nats: float, n_bytes: int) -> float:
    """Bits per UTF-8 byte ``sum_i -log p(x_i) / (n_bytes ln 2)`` (lm-evaluation-harness)."""
    return _per_unit(nll_sum_nats, n_bytes, "bytes") / math.log(2)


@register_metric(
    "word_perplexity",
    higher_is_better=False,
    description="exp(NLL sum / words): perplexity per whitespace word, tokenizer-independent",
    title="word perplexity",
    items={"lm": ratio_of("nll", "words", exp=True, name="word_perplexity")},
)
def word_perplexity(nll_sum: float, n_words: int) -> float:
    """Word perplexity ``exp(sum_i -log p(x_i) / n_words)`` (lm-evaluation-harness).

    ``n_words`` counts words of the original text (whitespace-split), not tokens.
    """
    return exp_or_inf(_per_unit(nll_sum, n_words, "words"))


@register_metric(
    "lm_loss",
    higher_is_better=False,
    description="NLL sum / tokens: the mean causal-LM loss in nats per token",
    items={"lm": ratio_of("nll", "tokens", name="lm_loss")},
    title="causal-LM loss",
    by_name_only=True,  # the pretraining loss of a decoder (pretraining_loss, finetune_task)
)
def lm_loss(nll_sum: float, n_tokens: int) -> float:
    """Mean loss per token ``sum_i -log p(x_i) / n_tokens`` (nats)."""
    return _per_unit(nll_sum, n_tokens, "tokens")


@register_metric(
    "mlm_loss",
    higher_is_better=False,
    description="NLL sum / masked positions: the mean masked-LM loss in nats",
    items={"lm": ratio_of("nll", "tokens", name="mlm_loss")},
    title="masked-LM loss",
    by_name_only=True,  # the pretraining loss of an encoder: its items count masked positions
)
def mlm_loss(nll_sum: float, n_masked: int) -> float:
    """Mean loss per masked position (``tokens`` of ``lm`` items counts masked positions)."""
    return _per_unit(nll_sum, n_masked, "masked positions")


@register_metric(
    "forgetting",
    higher_is_better=False,
    description=(
        "F_p = L_p(theta_f) - L_p(theta_p): rise of the pre-training loss after fine-tuning "
        "(Mao et al. 2022, 3.1)"
    ),
)
def forgetting(loss_after: float, loss_before: float) -> float:
    """Forgetting ``F_p = L_p(theta_f) - L_p(theta_p)`` (003, section 3.1).

    ``loss_after`` is the pre-training (e.g. masked/causal LM) loss of the
    fine-tuned model ``theta_f``, ``loss_before`` that of the pre-trained
    model ``theta_p``, both on the same data. Positive means forgetting.
    """
    return float(loss_after) - float(loss_before)

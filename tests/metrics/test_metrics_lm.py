"""Perplexity, bits per byte and forgetting from their formulas."""

import math

import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics import METRICS
from polymnesia.metrics.lm import bits_per_byte, forgetting, perplexity, word_perplexity


def test_uniform_model_over_four_symbols():
    # each of 10 tokens has p = 1/4: NLL sum = 10 ln 4
    nll = 10 * math.log(4)
    assert perplexity(nll, 10) == pytest.approx(4.0)
    assert bits_per_byte(nll, 10) == pytest.approx(2.0)  # 2 bits per 1-byte token
    assert bits_per_byte(nll, 20) == pytest.approx(1.0)
    assert word_perplexity(nll, 5) == pytest.approx(16.0)  # two tokens per word


def test_forgetting_sign():
    assert forgetting(2.5, 2.0) == pytest.approx(0.5)
    assert forgetting(1.5, 2.0) == pytest.approx(-0.5)
    assert METRICS.get("forgetting").higher_is_better is False


def test_bad_counts():
    with pytest.raises(PolymnesiaError, match="number of tokens must be positive"):
        perplexity(1.0, 0)
    with pytest.raises(PolymnesiaError, match="finite"):
        bits_per_byte(float("nan"), 3)


def test_every_registered_metric_is_documented():
    from pathlib import Path

    import polymnesia.metrics.classification  # noqa: F401
    import polymnesia.metrics.continual  # noqa: F401
    import polymnesia.metrics.forgetting  # noqa: F401
    import polymnesia.metrics.isotropy  # noqa: F401
    import polymnesia.metrics.translation  # noqa: F401

    doc = (Path(__file__).parents[2] / "docs" / "metrics.md").read_text(encoding="utf-8")
    mine = {
        f"polymnesia.metrics.{m}"
        for m in ("continual", "forgetting", "isotropy", "translation", "classification", "lm")
    }
    ours = [e for e in METRICS if e.obj.fn.__module__ in mine]
    assert len(ours) >= 23
    missing = [e.name for e in ours if f"`{e.name}`" not in doc]
    assert not missing, f"undocumented metrics: {missing}"
    assert all(e.description for e in ours)

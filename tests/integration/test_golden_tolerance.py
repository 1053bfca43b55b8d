"""The golden comparison holds each metric to its own tolerance (tests/golden/README.md)."""

from __future__ import annotations

import json

from golden import DEFAULT_TOLERANCE, TOLERANCES, compare


def _key(metric: str) -> str:
    return json.dumps(["arm", "en", metric, "drift", None, None, None, None, None])


def test_drift_within_its_tolerance_passes_where_the_default_would_fail() -> None:
    # the cross-CPU difference measured on the two_phase smoke run (AVX2 vs AVX-512 bf16)
    want, got = (
        {_key("covariance_drift"): 1.104883806139632},
        {_key("covariance_drift"): 1.104890074557436},
    )
    assert compare(want, got) == []
    assert TOLERANCES["covariance_drift"][0] > 5.7e-6 > DEFAULT_TOLERANCE[0]


def test_other_metrics_keep_the_default_tolerance() -> None:
    want, got = {_key("perplexity"): 10.0}, {_key("perplexity"): 10.0 * (1 + 5e-6)}
    (line,) = compare(want, got)
    assert "perplexity" in line and "tolerance 1e-06 relative" in line
    assert compare(want, {_key("perplexity"): 10.0 * (1 + 5e-7)}) == []


def test_drift_beyond_its_tolerance_fails() -> None:
    want, got = {_key("layer_covariance_drift"): 1.0}, {_key("layer_covariance_drift"): 1.001}
    assert len(compare(want, got)) == 1


def test_a_floor_raises_every_tolerance_and_missing_keys_are_named() -> None:
    want = {_key("perplexity"): 10.0, _key("acc"): 0.5}
    got = {_key("perplexity"): 10.1}
    assert compare(want, got, floor=(2e-2, 1e-3)) == [f"missing {_key('acc')}"]
    assert compare(want, got, subset=True, floor=(2e-2, 1e-3)) == []

"""lm-eval's stderr bootstrap runs in polymnesia's process, not in a forked Pool (a fork of a
process running torch's threads deadlocked in CI)."""

from __future__ import annotations

import os

import pytest
from lm_eval.api import metrics as lm_metrics

from polymnesia.harness.run import _bootstrap_in_process


def test_the_bootstrap_forks_no_pool_and_the_switch_is_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DISABLE_MULTIPROC", raising=False)

    def no_pool(*args: object, **kwargs: object) -> None:
        raise AssertionError("lm-eval forked a multiprocessing.Pool")

    monkeypatch.setattr("multiprocessing.Pool", no_pool)
    xs = [0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0]
    with _bootstrap_in_process():
        se = lm_metrics.bootstrap_stderr(lm_metrics.mean, xs, iters=2000)
    assert 0.1 < se < 0.25  # sd of the mean of 8 draws at p = 5/8: about 0.17
    assert "DISABLE_MULTIPROC" not in os.environ
    monkeypatch.setenv("DISABLE_MULTIPROC", "yes")
    with _bootstrap_in_process():
        pass
    assert os.environ["DISABLE_MULTIPROC"] == "yes"

"""The forgetting baselines judged against VANILLA: forgetting claims on CBT, paired, corrected."""

from __future__ import annotations

import numpy as np
import pytest

from polymnesia.continual.resample import Replicates
from polymnesia.experiments.lifelong.claims import baseline_claims, method_claims
from polymnesia.experiments.lifelong.results import Arm
from polymnesia.reports.claims import correct

N_ITEMS = 600


def _arm(label: str, method: str) -> Arm:
    R = np.full((3, 3), 0.3)
    np.fill_diagonal(R, 0.6)
    return Arm(label, method, None, 1, 1, Rs={"o1": R})


def _metrics(cbt: np.ndarray) -> dict[str, Replicates]:
    """Replicates of one arm's CBT; every arm's are drawn on the same resamples (paired)."""
    z = Replicates(0.5, np.full(cbt.shape, 0.5), N_ITEMS)
    return {"final": z, "cft": z, "cbt": Replicates(float(cbt.mean()), cbt, N_ITEMS)}


def test_each_baseline_is_judged_against_vanilla_on_cbt_paired_over_items() -> None:
    rng = np.random.default_rng(0)
    shared = rng.normal(0, 0.05, 400)  # the resample's effect, common to every arm
    own = lambda sd: rng.normal(0, sd, 400)  # noqa: E731
    arms = [
        _arm(x, y)
        for x, y in (
            ("VANILLA", "vanilla"),
            ("EWC", "ewc"),
            ("L2-SP", "l2sp"),
            ("LwF", "lwf"),
            ("MERGE", "merge"),
            ("REPLAY", "replay"),
            ("MONO", "mono"),
        )
    ]
    m = {
        "VANILLA": _metrics(-0.10 + shared + own(0.002)),
        "EWC": _metrics(-0.04 + shared + own(0.002)),  # forgets less: holds
        "L2-SP": _metrics(-0.10 + shared + own(0.002)),  # the same: inconclusive
        "LwF": _metrics(-0.16 + shared + own(0.002)),  # forgets more: contradicted
        "MERGE": _metrics(-0.05 + shared + own(0.002)),
        "REPLAY": _metrics(-0.02 + shared + own(0.002)),
        "MONO": _metrics(0.0 + shared),
    }
    found = {c.statement: c for c in baseline_claims(arms, m)}
    assert set(found) == {
        f"{x} forgets less than VANILLA (higher CBT)"
        for x in ("EWC", "L2-SP", "LwF", "MERGE", "REPLAY")
    }  # the paper's own arms are not baselines
    verdict = {s.split(" ")[0]: c.verdict for s, c in found.items()}
    assert verdict == {
        "EWC": "holds",
        "L2-SP": "inconclusive",
        "LwF": "contradicted",
        "MERGE": "holds",
        "REPLAY": "holds",
    }
    # paired: the shared resample noise (sd 0.05) cancels; unpaired it would swamp 0.06
    ewc = found["EWC forgets less than VANILLA (higher CBT)"]
    assert ewc.effect_label == "CBT(EWC) − CBT(VANILLA)"
    lo, hi = ewc.low, ewc.high
    assert 0.05 < lo < hi < 0.07


def test_baseline_claims_join_the_block_under_its_correction() -> None:
    rng = np.random.default_rng(1)
    arms = [_arm("VANILLA", "vanilla"), _arm("EWC", "ewc")]
    m = {
        "VANILLA": _metrics(-0.1 + rng.normal(0, 0.01, 400)),
        "EWC": _metrics(-0.1 + rng.normal(0, 0.01, 400)),
    }
    claims = correct(method_claims(arms, m) + baseline_claims(arms, m))
    assert len(claims) == 2 and all(c.p_adjusted is not None for c in claims if c.testable)
    # Khelli et al. 2025 runs none of the baselines: their claims are extensions, a family of their
    # own
    vanilla, ewc = claims
    assert (vanilla.kind, vanilla.id) == ("paper", "ll.vanilla_forgets")
    assert (ewc.kind, ewc.id) == ("extension", "ll.baseline.ewc.cbt_gt_vanilla")
    assert vanilla.p_adjusted == correct(method_claims(arms, m))[0].p_adjusted


def test_multi_is_compared_with_the_papers_methods_only() -> None:
    """A baseline arm (an extension) never enters the paper's "MULTI is best" claim."""
    arms = [_arm("MULTI", "multi"), _arm("VANILLA", "vanilla"), _arm("EWC", "ewc")]
    rng = np.random.default_rng(2)
    final = {name: 0.5 + d + rng.normal(0, 0.01, 400) for name, d in
             (("MULTI", 0.05), ("VANILLA", 0.0), ("EWC", 0.2))}  # fmt: skip
    m = {name: _metrics(np.zeros(400)) for name in final}
    for name, v in final.items():
        m[name]["final"] = Replicates(float(v.mean()), v, N_ITEMS)
    (best, *_) = method_claims(arms, m)
    assert best.statement == "MULTI has the best final score of the paper's methods"
    assert best.effect == pytest.approx(final["MULTI"].mean() - final["VANILLA"].mean())
    assert best.verdict == "holds"  # EWC's higher score does not count


def test_no_vanilla_no_baseline_claims() -> None:
    m = {"EWC": _metrics(np.zeros(10))}
    assert baseline_claims([_arm("EWC", "ewc")], m) == []


def test_a_baseline_that_did_not_learn_is_not_testable() -> None:
    arms = [_arm("VANILLA", "vanilla"), _arm("EWC", "ewc")]
    m = {"VANILLA": _metrics(np.full(50, -0.1)), "EWC": _metrics(np.full(50, 0.0))}
    (c,) = baseline_claims(arms, m, {"VANILLA": True, "EWC": False})
    assert c.verdict == "not testable"

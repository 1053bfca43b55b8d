"""Lifelong claims: forgetting claims on forgetting metrics, arms that did not learn (issue 29)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from polymnesia.continual.analysis import hop_average
from polymnesia.continual.resample import Replicates
from polymnesia.experiments.lifelong.claims import learned_arms, method_claims, script_claims
from polymnesia.experiments.lifelong.evidence import Evidence
from polymnesia.experiments.lifelong.results import Arm, multi_hop
from polymnesia.reports.baselines import label_baselines
from polymnesia.reports.claims_table import claims_table

RNG = np.random.default_rng(0)


def _reps(point: float) -> Replicates:
    return Replicates(point, point + RNG.normal(0, 0.005, 400), 600)


def _arm(label: str, method: str, rank: int | None, diag: float) -> Arm:
    R = np.full((3, 3), diag / 2)
    np.fill_diagonal(R, diag)
    return Arm(label, method, rank, 1, 1, Rs={"o1": R})


def _metrics(final: float, cbt: float, cft: float) -> dict[str, Replicates]:
    return {"final": _reps(final), "cbt": _reps(cbt), "cft": _reps(cft)}


def _evidence() -> Evidence:
    # 11 balanced classes: macro-F1 chance 1/11 = 0.091, majority 2/12/11 = 0.015 -> floor 0.18
    base = label_baselines(list(range(11)) * 20, n_labels=11)
    return Evidence(n=660, level=0.95, draws={}, baselines={"en": base, "fr": base, "de": base})


ARMS = [
    _arm("VANILLA", "vanilla", None, 0.60),
    _arm("SHARED LoRA r=11", "shared_lora", 11, 0.097),  # the arm: at chance
    _arm("NON-SHARED LoRA r=11", "nonshared_lora", 11, 0.55),
]
M = {
    "VANILLA": _metrics(0.50, -0.10, 0.50),
    "SHARED LoRA r=11": _metrics(0.06, -0.03, 0.05),
    "NON-SHARED LoRA r=11": _metrics(0.55, 0.0, 0.50),
}


def test_claims_on_an_arm_below_twice_chance_are_not_testable() -> None:
    ok = learned_arms(ARMS, _evidence(), "macro_f1")
    assert ok == {"VANILLA": True, "SHARED LoRA r=11": False, "NON-SHARED LoRA r=11": True}
    found = {c.statement: c for c in method_claims(ARMS, M, ok)}
    for s in (
        "SHARED LoRA r=11 forgets more than VANILLA (lower CBT)",
        "SHARED LoRA r=11 transfers forward less than VANILLA (lower CFT)",
    ):
        assert found[s].verdict == "not testable", s
        assert found[s].verdict_text() == "⊘ not testable: arm SHARED LoRA r=11 did not learn"
    assert found["VANILLA forgets: CBT < 0"].verdict == "holds"
    # no baselines (a task without class labels): nothing is set aside
    assert learned_arms(ARMS, None, "macro_f1") == {}
    assert all(c.testable for c in method_claims(ARMS, M) if c.statement.startswith("SHARED"))


def test_nonshared_lora_forgetting_is_not_applicable_and_final_score_is_its_claim() -> None:
    found = {c.statement: c for c in method_claims(ARMS, M, {})}
    forgets = found["NON-SHARED LoRA r=11 forgets less than VANILLA (higher CBT)"]
    assert forgets.verdict == "not applicable" and "CBT = 0 by construction" in forgets.reason
    final = found["NON-SHARED LoRA r=11 ends with a higher final score than VANILLA"]
    assert final.verdict == "holds" and final.effect_label.startswith("final(")
    # no claim tests forgetting on the final score any more
    assert not any("forgets" in c.statement and "final" in c.effect_label for c in found.values())
    table = claims_table(list(found.values()))
    verdict = table.columns.index("Verdict")
    assert any(
        str(r[verdict]).startswith("– not applicable: one adapter per language") for r in table.rows
    )


def test_script_claims_rest_on_their_arm() -> None:
    R = np.array(
        [[0.6, 0.2, 0.3, 0.1], [0.5, 0.6, 0.3, 0.2], [0.4, 0.5, 0.7, 0.2], [0.3, 0.4, 0.5, 0.6]]
    )
    arm = Arm("VANILLA", "vanilla", None, 1, 1, Rs={"o1": R})
    order = {"o1": ["en", "ru", "fr", "ar"]}  # Latin and non-Latin scripts
    plain = script_claims(arm, order, 1, None)
    # MBT of 3 of the 4 languages: no test over languages reaches p < 0.05 (issue 44)
    assert len(plain) == 2 and all(c.verdict == "not testable" for c in plain)
    assert plain[0].reason == (
        "2 non-Latin vs 1 Latin language: no test over languages can reach p < 0.05 "
        "(smallest exact permutation p 0.667)"
    )
    aside = script_claims(arm, order, 1, None, {"VANILLA": False})
    assert [c.reason for c in aside] == ["arm VANILLA did not learn"] * 2


def test_script_claims_are_tested_over_languages() -> None:
    """Five Latin and five non-Latin languages: the language is the unit (Welch over the
    hop-averaged values), so the interval is about scripts, and p matches the t test."""
    langs = ["en", "fr", "de", "es", "it", "ru", "ar", "el", "hi", "ja"]
    n = len(langs)
    rng = np.random.default_rng(4)
    R = np.tril(rng.uniform(0.4, 0.6, (n, n)))
    for j in range(5, n):  # non-Latin columns lose more after they are learned
        R[j + 1 :, j] -= 0.2
    arm = Arm("VANILLA", "vanilla", None, 1, 1, Rs={"o1": R})
    found = {c.id: c for c in script_claims(arm, {"o1": langs}, 1, None)}
    mbt = found["ll.scripts.vanilla.non_latin_receive_less"]
    # one language has no MBT at one hop: 5 non-Latin against 4 Latin (smallest exact p 0.016)
    assert mbt.testable and mbt.n == 9 and mbt.test.startswith("Welch t-test over units (5 vs 4)")
    values = hop_average(multi_hop({"o1": R}, {"o1": langs}, 1, "mbt"))
    other = [values[x] for x in langs[5:] if np.isfinite(values[x])]
    latin = [values[x] for x in langs[:5] if np.isfinite(values[x])]
    ref = stats.ttest_ind(other, latin, equal_var=False)
    assert mbt.effect == pytest.approx(np.mean(other) - np.mean(latin))
    assert mbt.p_value == pytest.approx(ref.pvalue)
    assert (mbt.low, mbt.high) == pytest.approx(tuple(ref.confidence_interval()))

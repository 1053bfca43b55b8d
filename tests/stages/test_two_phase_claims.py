"""The two-phase CFT paper's claims judged with the right test (issue 29, item 2): non-inferiority
with the
config's margin for "a similar Phase 2 keeps English ability", mitigations judged only where
plain CFT loses English ability, and Holm's correction over the paper's claims (issue 44:
extensions and the setup check apart, a failed premise makes its claims not applicable, a
one-seed run is judged with its config's own seed noise).

Most tests run the shipped config with three seeds, so that no seed-noise band applies and the
verdicts are those of the fake evidence alone."""

from __future__ import annotations

import math
import re
from pathlib import Path

from polymnesia.experiments.loading import load_config
from polymnesia.experiments.seeds import band_of
from polymnesia.experiments.shared import PRETRAIN
from polymnesia.experiments.two_phase.claims import claims, correlation_claim
from polymnesia.experiments.two_phase.roles import (
    cft_stage,
    evaluated_models,
    mix_stage,
    p1_stage,
)
from polymnesia.metrics.uncertainty import PairedTest
from polymnesia.reports.claims_table import claims_markdown

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "configs" / "two_phase.yaml"
SMOKE = ROOT / "configs" / "two_phase_smoke.yaml"


class FakeEvidence:
    """Every model evaluated; EA/MA differences from a table of (effect, low, high, p)."""

    def __init__(self, diffs: dict[tuple[str, str, str], tuple[float, float, float, float]]):
        self.diffs = diffs
        self.chance: dict[str, tuple[bool | None, float | None]] = {}

    def has(self, stage: str) -> bool:
        return True

    def difference(self, a: str, b: str, which: str) -> PairedTest:
        # Phase 1 teaches the English tasks unless a test says otherwise
        taught = (0.2, 0.15, 0.25, 0.0) if b == PRETRAIN and which == "EA" else None
        e, lo, hi, p = self.diffs.get((a, b, which), taught or (0.0, -0.05, 0.05, 1.0))
        return PairedTest(e, lo, hi, p, 300, "paired bootstrap over documents (1000 resamples)")

    def ma_chance(self, stage: str) -> tuple[bool | None, float | None]:
        """Chance unknown (generative MA tasks) unless a test says otherwise."""
        return self.chance.get(stage, (None, None))


def _setup(path: Path, seeds: str = "seeds=[0,1,2]") -> tuple[object, dict[str, str]]:
    cfg = load_config(path, [seeds] if seeds else [])
    arms = {k: v for k, v in evaluated_models(cfg).items() if k.startswith("mit_")}
    return cfg, arms


def test_shipped_configs_mitigate_the_pair_that_loses_english_ability() -> None:
    for path in (SHIPPED, SMOKE):
        cfg = load_config(path, [])
        pair = cfg.pairs[cfg.mitigation.pair]
        assert cfg.sets[pair.phase2].kind == "phase2_dissimilar", path.name
        pool = cfg.sets[cfg.mitigation.pool]
        assert pool.kind == "english_counterpart" and pool.of == pair.phase2, path.name
        assert cfg.evaluate.ea_margin == 0.05


def test_similar_keeps_english_ability_is_a_non_inferiority_test() -> None:
    cfg, arms = _setup(SHIPPED)
    similar = cfg.pairs[0]
    p1, p2 = p1_stage(similar.phase1), cft_stage(similar)
    # the documented run: -0.010 [-0.057, +0.037]; within a margin of 0.1 it holds
    ev = FakeEvidence({(p2, p1, "EA"): (-0.010, -0.030, 0.010, 0.3)})
    keep = next(c for c in claims(cfg, ev, arms) if "similar set keeps" in c.statement)
    assert keep.margin == 0.05 and keep.verdict == "holds"  # a superiority test: inconclusive
    assert "within the margin of 0.05" in keep.statement
    assert "margin -0.050" in claims_markdown([keep])
    ev = FakeEvidence({(p2, p1, "EA"): (-0.010, -0.057, 0.037, 0.7)})
    keep = next(c for c in claims(cfg, ev, arms) if "similar set keeps" in c.statement)
    assert keep.verdict == "inconclusive"  # the interval reaches past -0.05


def test_mitigations_are_not_applicable_where_plain_cft_loses_nothing() -> None:
    cfg, arms = _setup(SHIPPED)
    pair = cfg.pairs[cfg.mitigation.pair]
    p1, plain = p1_stage(pair.phase1), cft_stage(pair)
    gr = next(k for k, v in arms.items() if v == "GR_10")
    ev = FakeEvidence(
        {
            (p1, plain, "EA"): (0.0, 0, 0, 1),
            (plain, p1, "EA"): (-0.01, -0.04, 0.02, 0.5),
            (gr, plain, "EA"): (0.1, 0.05, 0.15, 0.0),
        }
    )
    found = claims(cfg, ev, arms)
    keeps = [c for c in found if "better than plain CFT" in c.statement]
    assert keeps and all(c.verdict == "not applicable" for c in keeps)
    assert keeps[0].reason.startswith("plain CFT on english -> dissimilar lost no English ability")
    assert "-0.010 [-0.040, +0.020]" in keeps[0].reason
    lora_ma = next(c for c in found if c.statement.startswith("LoRA gains less"))
    assert lora_ma.testable  # about MA, not about mitigating a loss
    # where plain CFT loses English ability, the same claims are tested
    ev.diffs[(plain, p1, "EA")] = (-0.25, -0.31, -0.18, 0.0)
    found = claims(cfg, ev, arms)
    gr_claim = next(c for c in found if c.statement.startswith("GR_10 keeps"))
    assert gr_claim.verdict == "holds" and gr_claim.correction == "holm"


def test_the_block_is_corrected_with_holm() -> None:
    cfg, arms = _setup(SHIPPED)
    similar = cfg.pairs[0]
    ev = FakeEvidence(
        {(cft_stage(similar), mix_stage(similar), "combined"): (0.03, 0.002, 0.06, 0.04)}
    )
    found = claims(cfg, ev, arms)
    mix = next(
        c for c in found if c.statement.startswith("CFT beats the mixture (english -> similar")
    )
    assert mix.p_adjusted is not None and mix.p_adjusted > 0.05  # 0.04 times the family
    assert mix.verdict == "inconclusive"  # significant alone, not after Holm


def test_the_setup_check_is_a_precondition_whose_failure_makes_claims_not_applicable() -> None:
    cfg, arms = _setup(SHIPPED)
    similar = cfg.pairs[0]
    p1, p2 = p1_stage(similar.phase1), cft_stage(similar)
    ev = FakeEvidence({(p2, p1, "EA"): (-0.010, -0.030, 0.010, 0.3)})
    found = claims(cfg, ev, arms)
    setup = next(c for c in found if c.statement.startswith("Phase 1 on english teaches"))
    assert (setup.kind, setup.id, setup.correction) == (
        "precondition",
        "tp.setup.p1_teaches.english",
        "",
    )  # left out of the correction
    assert setup.verdict == "holds"
    ev.diffs[(p1, PRETRAIN, "EA")] = (0.01, -0.02, 0.04, 0.5)  # Phase 1 taught nothing
    found = claims(cfg, ev, arms)
    keep = next(c for c in found if "similar set keeps" in c.statement)
    assert keep.verdict == "not applicable"
    assert keep.reason.startswith("its premise 'Phase 1 on english teaches the English tasks")
    assert "is inconclusive here (+0.010 [-0.020, +0.040])" in keep.reason
    text = claims_markdown(found)
    assert "Setup checks: preconditions of the claims" in text
    assert "Setup checks (preconditions, outside the counts and the correction): 0 of 1 pass" in (
        text
    )


def test_comparisons_the_paper_does_not_make_are_extensions_with_their_own_family() -> None:
    cfg, arms = _setup(SHIPPED)
    found = claims(cfg, FakeEvidence({}), arms)
    kinds = {c.statement: c.kind for c in found}
    assert kinds["CFT beats the mixture (english -> similar), mean of EA and MA"] == "paper"
    assert kinds["CFT beats the mixture (english -> dissimilar), mean of EA and MA"] == "extension"
    assert kinds["LoRA keeps English ability better than plain CFT"] == "extension"
    assert kinds["LoRA gains less multilingual ability than full CFT"] == "extension"
    assert kinds["GR_10 keeps English ability better than plain CFT"] == "paper"
    assert len({c.id for c in found}) == len(found) and all(c.id.startswith("tp.") for c in found)
    # a strong extension changes no paper claim's adjusted p: the families are apart
    pair = cfg.pairs[cfg.mitigation.pair]
    lora = next(k for k, v in arms.items() if v == "LoRA")
    strong = FakeEvidence({(lora, cft_stage(pair), "MA"): (-0.3, -0.35, -0.25, 0.0)})
    before = {c.id: c.p_adjusted for c in found if c.kind == "paper"}
    after = {c.id: c.p_adjusted for c in claims(cfg, strong, arms) if c.kind == "paper"}
    assert before == after


def test_a_one_seed_run_is_judged_with_its_configs_own_seed_noise() -> None:
    cfg, arms = _setup(SHIPPED, seeds="")
    band = band_of(cfg)
    assert band is not None and band.config == "configs/two_phase.yaml"
    dissimilar = cfg.pairs[1]
    p1, p2 = p1_stage(dissimilar.phase1), cft_stage(dissimilar)
    # clearly below zero on the items alone (p = 0.001), but seeds 1 and 2 moved this effect by
    # far more than the items do
    ev = FakeEvidence({(p2, p1, "EA"): (-0.03, -0.048, -0.012, 0.001)})
    c = next(x for x in claims(cfg, ev, arms) if x.id == "tp.p2_loses_ea.english-dissimilar")
    assert c.noise is not None and c.noise.seeds == (1, 2) and c.noise.df == 1
    assert c.verdict == "inconclusive"  # the band turns a "holds" into inconclusive
    assert "with seed noise [" in c.evidence() and "(2 seeds: 1, 2; df 1)" in c.evidence()
    # a renamed copy is the same content and gets the same band; another size gets none
    renamed = load_config(SHIPPED, ["name=my_copy"])
    assert band_of(renamed) == band
    other = load_config(SHIPPED, ["base.train.steps=7"])
    assert band_of(other) is None
    found = claims(other, ev, arms)
    paper = [c for c in found if c.kind != "precondition" and not c.not_applicable]
    assert {c.verdict for c in paper} == {"seed noise not measured"}
    assert "seeds: [0, 1, 2]" in paper[0].reason


def test_every_paper_claim_names_its_table_and_every_claim_its_design() -> None:
    cfg, arms = _setup(SHIPPED)
    found = claims(cfg, FakeEvidence({}), arms)
    for c in found:
        assert c.test_design in ("superiority", "non-inferiority"), c.statement
        if c.kind == "paper":
            assert re.search(r"Table|Figure|Section", c.source), c.statement
    keep = next(c for c in found if c.id.startswith("tp.p2_keeps_ea."))
    assert keep.test_design == "non-inferiority" and keep.margin == 0.05


def test_claims_about_ma_between_models_at_chance_are_not_testable() -> None:
    """MA at chance in both models (issue 44: 0.24-0.26 against 0.25): "CFT beats the mixture"
    (half MA) and "Phase 2 improves MA" are not testable; one model above chance makes them
    testable again."""
    cfg, arms = _setup(SHIPPED)
    similar = cfg.pairs[0]
    p1, p2, mix = p1_stage(similar.phase1), cft_stage(similar), mix_stage(similar)
    ev = FakeEvidence({(p2, p1, "MA"): (0.01, -0.02, 0.04, 0.5)})
    ev.chance = {s: (False, 0.25) for s in evaluated_models(cfg)}
    found = {c.id: c for c in claims(cfg, ev, arms)}
    pid = f"{similar.phase1}-{similar.phase2}"
    gains, beats = found[f"tp.p2_gains_ma.{pid}"], found[f"tp.cft_gt_mixture.{pid}"]
    assert gains.kind == "paper" and "Table 2" in gains.source
    assert gains.verdict == "not testable" and beats.verdict == "not testable"
    assert gains.reason == (
        f"arms CFT {similar.phase1} -> {similar.phase2} and P1 {similar.phase1} have MA at "
        "chance (not above 0.250)"
    )
    assert f"Mix {similar.phase1} + {similar.phase2}" in beats.reason
    ev.chance[p2] = (True, 0.25)
    found = {c.id: c for c in claims(cfg, ev, arms)}
    assert found[f"tp.p2_gains_ma.{pid}"].testable
    assert found[f"tp.cft_gt_mixture.{pid}"].testable
    assert mix in ev.chance


def test_the_ea_change_correlates_with_des_only_over_enough_pairs() -> None:
    """Section 4.3: Spearman over pairs, Fisher z interval with the p of the same z; fewer than
    five pairs cannot reach p < 0.05 and are not testable."""
    two = correlation_claim("DES", +1, {"a": -0.2, "b": 0.1}, {"a": 0.3, "b": 0.8})
    assert two.verdict == "not testable" and two.test_design == "correlation"
    assert two.reason == "2 pairs: a rank correlation needs at least 5 to reach p < 0.05"
    change = {k: v for k, v in zip("abcdef", [-0.3, -0.2, -0.1, 0.0, 0.1, 0.2], strict=True)}
    des = {k: v for k, v in zip("abcdef", [0.1, 0.2, 0.3, 0.4, 0.6, 0.5], strict=True)}
    c = correlation_claim("DES", +1, change, des)
    # hand-checked: rho = 1 - 6 * 2 / (6 * 35) = 0.942857; z = atanh(rho) = 0.5 ln(34) = 1.7632;
    # se = sqrt(1.06 / 3) = 0.59442; p = 2 * (1 - Phi(2.966)) = 0.00302
    assert abs(c.effect - 0.942857) < 1e-5 and c.n == 6
    assert abs(c.low - math.tanh(1.7632 - 1.959964 * 0.59442)) < 1e-4 and c.high < 1
    assert abs(c.p_value - 0.00302) < 1e-4 and c.verdict == "holds"
    falls = correlation_claim("MPD", -1, change, des)
    assert falls.verdict == "contradicted" and falls.id == "tp.ea_change_vs.mpd"

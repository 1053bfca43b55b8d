"""Stage names of the two-phase protocol, shared by the builder and the report."""

from __future__ import annotations

from polymnesia.experiments.shared import PRETRAIN
from polymnesia.experiments.two_phase.config import INSTRUCT, PairConfig, TwoPhaseConfig


def set_stage(name: str) -> str:
    return f"set_{name}"


def p1_stage(phase1: str) -> str:
    """The Phase 1 model of ``phase1`` (an instruction set, or the imported Instruct model)."""
    return f"p1_{phase1}"


def single_stage(phase2: str) -> str:
    """The base tuned on the Phase 2 set alone (for MPD, Table 4)."""
    return f"single_{phase2}"


def cft_stage(pair: PairConfig) -> str:
    return f"cft_{pair.key}"


def mix_stage(pair: PairConfig) -> str:
    return f"mix_{pair.key}"


def eval_stage(model_stage: str) -> str:
    return f"eval_{model_stage}"


def evaluated_models(cfg: TwoPhaseConfig) -> dict[str, str]:
    """Model stage -> its label in tables, for every model the protocol scores."""
    out = {PRETRAIN: "base"}
    if cfg.instruct_model is not None:
        out[p1_stage(INSTRUCT)] = "P1 Instruct"
    for name in dict.fromkeys(p.phase1 for p in cfg.pairs if p.phase1 != INSTRUCT):
        out[p1_stage(name)] = f"P1 {name}"
    for pair in cfg.pairs:
        out[cft_stage(pair)] = f"CFT {pair.phase1} -> {pair.phase2}"
        if cfg.mixture and pair.phase1 != INSTRUCT:
            out[mix_stage(pair)] = f"Mix {pair.phase1} + {pair.phase2}"
    out.update(mitigation_arms(cfg))
    return out


def mitigation_arms(cfg: TwoPhaseConfig) -> dict[str, str]:
    """Model stage -> name of every Phase 2 arm of the mitigated pair: Table 5's replay and
    freezing arms, the forgetting baselines of ``mitigation.baselines`` and LoRA, in that
    order. The one list of arms: they are evaluated, listed in Table 5 and the claims, and
    drawn in Figures 1-2 (the pair's drift stage) under these names."""
    m = cfg.mitigation
    return {} if m is None else {f"mit_{name}": name for name in m.arm_names()}

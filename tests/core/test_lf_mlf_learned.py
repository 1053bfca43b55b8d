"""lf_mlf claims that rest on an arm that did not learn its task are not testable (issue 29)."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np

from polymnesia.experiments.lf_mlf.baselines import baseline_rows
from polymnesia.experiments.lf_mlf.claims import all_claims, transfer_checks
from polymnesia.experiments.loading import load_config
from polymnesia.items import ItemSet
from polymnesia.results import Score

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "lf_mlf_smoke.yaml"
N, K = 60, 3


def _arm(model: str, right: float, group: str, lang: str, task: str) -> tuple[Score, ItemSet]:
    rng = np.random.default_rng(zlib.crc32(f"{model}/{lang}/{group}".encode()))
    gold = np.arange(N) % K
    pred = np.where(rng.random(N) < right, gold, (gold + 1) % K)
    where: dict[str, Any] = {"task": task, "group": group, "setting": "main", "seed": 0}
    items = ItemSet(
        model,
        lang,
        "label",
        list(range(N)),
        {"pred": pred.tolist(), "gold": gold.tolist()},
        n_labels=K,
        **where,
    )
    return Score(model, lang, "accuracy", float(np.mean(pred == gold)), **where), items


def test_zero_shot_and_forgetting_claims_on_an_arm_that_did_not_learn() -> None:
    cfg = load_config(SMOKE)
    task = cfg.task_list()[0]
    scores, items = [], []
    # LF-MLF learned its sources (0.9 right: 2.7x chance 1/3); Uniform-MLF is at chance there
    for model, right in (("LF-MLF", 0.9), ("Uniform-MLF", 0.2)):
        for lang in cfg.sources_of(task):
            s, i = _arm(model, right, "source", lang, task.name)
            scores.append(s)
            items.append(i)
        s, i = _arm(model, right, "target", "es", task.name)
        scores.append(s)
        items.append(i)
    rows = {r[0]: r for r in baseline_rows(cfg, task, scores, items)}
    assert set(rows) == {"LF-MLF", "Uniform-MLF"}
    found = all_claims(cfg, scores, items)
    zs = next(
        c for c in found if "better zero-shot" in c.statement and "Uniform-MLF" in c.statement
    )
    assert zs.verdict == "not testable"
    assert zs.verdict_text() == "⊘ not testable: arm Uniform-MLF did not learn"
    # both learned: the same claim is tested
    scores2, items2 = [], []
    for model, right in (("LF-MLF", 0.95), ("Uniform-MLF", 0.85)):
        for lang in [*cfg.sources_of(task), "es"]:
            s, i = _arm(model, right, "source" if lang != "es" else "target", lang, task.name)
            scores2.append(s)
            items2.append(i)
    zs2 = next(c for c in all_claims(cfg, scores2, items2) if "better zero-shot" in c.statement)
    assert zs2.testable and zs2.verdict in ("holds", "inconclusive")


def test_lf_mlf_against_mgda_is_an_extension() -> None:
    """Mao et al. 2022 runs no MGDA: LF-MLF against it is judged apart (issue 44)."""
    cfg = load_config(SMOKE, ["methods=[uniform,mgda,lf_mlf]"])
    task = cfg.task_list()[0]
    scores, items = [], []
    for model, right in (("LF-MLF", 0.95), ("Uniform-MLF", 0.85), ("MGDA", 0.85)):
        for lang in [*cfg.sources_of(task), "es"]:
            s, i = _arm(model, right, "source" if lang != "es" else "target", lang, task.name)
            scores.append(s)
            items.append(i)
    found = {c.statement: c for c in all_claims(cfg, scores, items)}
    mgda = found[f"{task.name}: LF-MLF has better zero-shot accuracy than MGDA"]
    uniform = found[f"{task.name}: LF-MLF has better zero-shot accuracy than Uniform-MLF"]
    assert (mgda.kind, uniform.kind) == ("extension", "paper")
    assert mgda.id == f"lfmlf.{task.name}.zero_shot_gt.mgda" and "no MGDA there" in mgda.source


def _run(cfg: Any, rights: dict[str, tuple[float, float]]) -> tuple[list[Score], list[ItemSet]]:
    """Each arm's (source, target) share right on every source and on target es."""
    task = cfg.task_list()[0]
    scores, items = [], []
    for model, (src, tgt) in rights.items():
        for lang in [*cfg.sources_of(task), "es"]:
            group = "target" if lang == "es" else "source"
            s, i = _arm(model, tgt if lang == "es" else src, group, lang, task.name)
            scores.append(s)
            items.append(i)
    return scores, items


def test_zero_shot_claims_between_arms_that_did_not_transfer_are_not_testable() -> None:
    """Both arms learned their sources but sit at the targets' majority share (1/3): the
    zero-shot difference says nothing; one arm above it makes the claim testable (issue 44)."""
    cfg = load_config(SMOKE, ["slf=false"])
    task = cfg.task_list()[0]
    zs = f"{task.name}: LF-MLF has better zero-shot accuracy than Uniform-MLF"
    scores, items = _run(cfg, {"LF-MLF": (0.95, 1 / 3), "Uniform-MLF": (0.9, 1 / 3)})
    found = {c.statement: c for c in all_claims(cfg, scores, items)}
    assert found[zs].verdict == "not testable"
    assert "arms LF-MLF and Uniform-MLF did not transfer" in found[zs].reason
    checks = transfer_checks(cfg, task, scores, items)
    assert set(checks) == {"LF-MLF", "Uniform-MLF"}
    assert checks["LF-MLF"].kind == "precondition" and checks["LF-MLF"].verdict != "holds"
    scores, items = _run(cfg, {"LF-MLF": (0.95, 0.9), "Uniform-MLF": (0.9, 1 / 3)})
    found = {c.statement: c for c in all_claims(cfg, scores, items)}
    assert transfer_checks(cfg, task, scores, items)["LF-MLF"].verdict == "holds"
    assert found[zs].testable and found[zs].verdict == "holds"


def test_fine_tuning_performance_is_a_non_inferiority_claim() -> None:
    """Tables 4-6 ("comparable fine-tuning performance"): LF-MLF no lower than each other
    method on the sources by more than the margin; MGDA's is an extension."""
    cfg = load_config(SMOKE, ["methods=[uniform,mgda,lf_mlf]", "slf=false"])
    task = cfg.task_list()[0]
    scores, items = _run(
        cfg, {"LF-MLF": (0.9, 0.9), "Uniform-MLF": (0.9, 0.9), "MGDA": (0.75, 0.9)}
    )
    found = {c.id: c for c in all_claims(cfg, scores, items)}
    uniform = found[f"lfmlf.{task.name}.fine_tuning_ni.uniform_mlf"]
    mgda = found[f"lfmlf.{task.name}.fine_tuning_ni.mgda"]
    assert (uniform.kind, mgda.kind) == ("paper", "extension")
    assert uniform.test_design == "non-inferiority" and uniform.margin == 0.01
    assert "at most 0.01 lower" in uniform.statement
    # equal shares right (the item draws differ by model): a difference near 0, not resolved
    assert abs(uniform.effect) < 0.1 and uniform.verdict == "inconclusive"
    assert mgda.effect > 0.1 and mgda.verdict == "holds"  # far above MGDA
    wide = load_config(
        SMOKE, ["methods=[uniform,mgda,lf_mlf]", "slf=false", "fine_tuning_margin=0.5"]
    )
    got = {c.id: c for c in all_claims(wide, scores, items)}
    assert got[f"lfmlf.{task.name}.fine_tuning_ni.uniform_mlf"].verdict == "holds"

"""lf_mlf claims that rest on an arm that did not learn its task are not testable (issue 29)."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np

from polymnesia.experiments.lf_mlf.claims import all_claims, baseline_rows
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
    """Paper 003 runs no MGDA: LF-MLF against it is judged apart (issue 44)."""
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

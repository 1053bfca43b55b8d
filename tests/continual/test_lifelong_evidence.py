"""A lifelong run's items -> replicates of R, metric intervals and claims (hand-built run
folder).
"""

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from polymnesia.continual.resample import draw_items
from polymnesia.experiments import load_config
from polymnesia.experiments.lifelong.claims import baselines, method_claims
from polymnesia.experiments.lifelong.evidence import attach_evidence, metric_replicates
from polymnesia.experiments.lifelong.results import Arm
from polymnesia.items import ItemSet, write_items
from polymnesia.pipeline.run_dir import merge_stage_outputs

SMOKE = Path(__file__).resolve().parents[2] / "configs" / "lifelong_smoke.yaml"
ORDER = ["en", "fr"]
GOLD = {"en": [0, 1, 1, 0, 1, 1], "fr": [1, 1, 0, 0, 1, 0]}
# predictions of VANILLA after each step (en learned first, then fr: en partly forgotten)
PRED = {
    ("untrained", None): {"en": [0, 0, 0, 0, 0, 0], "fr": [0, 0, 0, 0, 0, 0]},
    ("VANILLA", 0): {"en": [0, 1, 1, 0, 1, 1], "fr": [1, 1, 1, 1, 1, 1]},
    ("VANILLA", 1): {"en": [0, 1, 0, 0, 1, 0], "fr": [1, 1, 0, 0, 1, 0]},
}


def _cfg(tmp_path: Path) -> Any:
    raw = yaml.safe_load(SMOKE.read_text())
    raw.update(
        languages=ORDER,
        methods=["vanilla"],
        ranks=[],
        orders=[{"name": "o", "kind": "explicit", "languages": ORDER}],
        task={"name": "t", "kind": "sequence", "metric": "accuracy", "num_labels": 2},
        bootstrap={"n_resamples": 50, "seed": 3},
    )
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(str(path))


def _run(tmp_path: Path) -> Path:
    run, entries = tmp_path / "run", {}
    for (model, step), preds in PRED.items():
        name = "untrained" if model == "untrained" else f"vanilla_o_{step}"
        sets = [
            ItemSet(
                model,
                lang,
                "label",
                [f"v{i}" for i in range(6)],
                {"pred": [float(x) for x in p], "gold": [float(x) for x in GOLD[lang]]},
                task="t",
                step=step,
                n_labels=2,
            )
            for lang, p in preds.items()
        ]
        entries[name] = tmp_path / "cache" / name
        entries[name].mkdir(parents=True)
        write_items(entries[name] / "items.jsonl", sets)
    merge_stage_outputs(run, entries)  # the runner: the run folder's results/items.jsonl
    return run


def _acc(pred: list[int], gold: list[int], idx: np.ndarray) -> float:
    return float(np.mean(np.asarray(pred)[idx] == np.asarray(gold)[idx]))


def test_replicates_recompute_every_entry_on_one_draw_per_language(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    R = np.array([[1.0, 0.5], [4 / 6, 1.0]])
    arm = Arm("VANILLA", "vanilla", None, 10, 10, {"o": R})
    ev = attach_evidence(cfg, _run(tmp_path), [arm], {"o": ORDER})
    assert ev is not None and ev.n == 12 and arm.reps is not None
    draws = draw_items({"en": 6, "fr": 6}, 50, 3)
    k = 7
    want = [
        [_acc(PRED[("VANILLA", i)][lang], GOLD[lang], draws[lang][k]) for lang in ORDER]
        for i in (0, 1)
    ]
    np.testing.assert_allclose(arm.reps["o"][k], want)
    m = metric_replicates(arm, {"o": ORDER}, {"en": 0.5, "fr": 0.5}, ev)
    assert m["cbt"].point == pytest.approx(4 / 6 - 1.0)
    assert m["cbt"].values[k] == pytest.approx(want[1][0] - want[0][0])
    untrained_en = _acc(PRED[("untrained", None)]["fr"], GOLD["fr"], draws["fr"][k])
    assert m["fwt_vs_untrained"].values[k] == pytest.approx(want[0][1] - untrained_en)
    claims = method_claims([arm], {arm.label: m})
    assert [c.statement for c in claims] == ["VANILLA forgets: CBT < 0"]
    assert claims[0].n == 12 and claims[0].effect == pytest.approx(-1 / 3)
    t = baselines([arm], {arm.label: m}, ev, "accuracy", None)
    assert t is not None and t.rows[0][0] == "VANILLA"
    assert t.rows[0][5] == pytest.approx((4 / 6 + 3 / 6) / 2)  # majority accuracy: en 4/6, fr 3/6


def test_no_items_means_no_replicates(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path)
    arm = Arm("VANILLA", "vanilla", None, 10, 10, {"o": np.eye(2)})
    assert attach_evidence(cfg, tmp_path / "empty", [arm], {"o": ORDER}) is None
    m = metric_replicates(arm, {"o": ORDER}, {}, None)
    assert not m["cbt"].interval().has_spread
    assert method_claims([arm], {arm.label: m})[0].verdict == "inconclusive"

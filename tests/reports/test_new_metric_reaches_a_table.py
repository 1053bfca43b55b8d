"""A new metric reaches a real protocol's tables from its registration alone (issues 28, 38).

docs/architecture.md's "A metric" checklist, followed once: the metric is registered here as
it would be in ``src/polymnesia/metrics/lm.py``, a pure function plus, in ``items=``, how it
is recomputed on ``lm`` items, and a ``title``. Nothing else is edited. ``evaluate_lm`` scores
every metric registered for ``lm`` items (:func:`~polymnesia.metrics.base.scored_metrics`;
``tests/stages/test_evaluate_lm_items.py`` runs the stage), a metric its sums do not give by
its rule on the items (:func:`~polymnesia.items.scores_with_intervals`, as here), and
active_forgetting's report shows every such metric in its Table 1 family, with the registered
title and direction and stratified intervals over the items.

The run folder is the active_forgetting smoke run's golden score records
(``tests/golden/active_forgetting_smoke.json``) plus the toy metric's scores and the ``lm``
items they come from, so the report is built from score records, with no training.
"""

from __future__ import annotations

import csv
import json
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from polymnesia.experiments import EXPERIMENTS, load_config
from polymnesia.items import RUN_ITEMS, BootstrapConfig, ItemSet, scores_with_intervals, write_items
from polymnesia.metrics.base import METRICS, ratio_of, register_metric, scored_metrics
from polymnesia.metrics.uncertainty import paired_bootstrap
from polymnesia.results import Score, write_scores

ROOT = Path(__file__).resolve().parents[2]
NAME = "test_nats_per_word"
KEY = ("model", "lang", "metric", "task", "group", "size", "seed", "step", "setting")


def _nats_per_word(nll_sum: float, n_words: int) -> float:
    """Summed negative log-likelihood per whitespace word (nats)."""
    return float(nll_sum) / n_words


@pytest.fixture
def toy_metric() -> Iterator[str]:
    """The one edit under src/: a registration, taken out again after the test (other tests
    check the registered lm metrics)."""
    assert NAME not in METRICS  # loads the registry first
    register_metric(
        NAME,
        higher_is_better=False,
        title="toy nats per word",
        items={"lm": ratio_of("nll", "words", name=NAME)},
    )(_nats_per_word)
    yield NAME
    del METRICS._entries[NAME]  # the registry has no removal: this test's own entry


def _golden_scores() -> list[Score]:
    table = json.loads((ROOT / "tests/golden/active_forgetting_smoke.json").read_text("utf-8"))
    out = []
    for key, value in table.items():
        fields = {k: v for k, v in zip(KEY, json.loads(key), strict=True) if v is not None}
        out.append(Score(value=value, **fields))
    return out


def _items(arm: str, lang: str, group: str | None, size: str | None, per_word: float) -> ItemSet:
    rng = np.random.default_rng(zlib.crc32(f"{arm}/{lang}".encode()))
    words = rng.integers(5, 30, 40).astype(float)
    cols = {
        "nll": list(words * (per_word + rng.normal(0, 0.1, 40))),
        "tokens": list(words * 1.5),
        "bytes": list(words * 6),
        "words": list(words),
    }
    return ItemSet(arm, lang, "lm", list(range(40)), cols, group=group, size=size)


def _run_folder(tmp_path: Path) -> tuple[Path, list[Score], list[ItemSet]]:
    scores = _golden_scores()
    lm = [s for s in scores if s.task == "lm" and s.metric == "bits_per_byte"]
    sets = [
        _items(s.model, s.lang, s.group, s.size, {"Baseline": 3.0, "BA": 3.2, "AFA": 2.6}[s.model])
        for s in lm
    ]
    boot = BootstrapConfig(n_resamples=200)
    toy = [  # what evaluate_lm scores for it on each language
        score
        for items in sets
        for score in scores_with_intervals(
            items,
            [NAME],
            boot,
            model=items.model,
            lang=items.lang,
            group=items.group,
            size=items.size,
        )
    ]
    run = tmp_path / "run"
    (run / "results").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"experiment": "active_forgetting", "stages": {}}))
    write_scores(run / "results" / "scores.jsonl", [*scores, *toy])
    write_items(run / RUN_ITEMS, sets)
    return run, toy, sets


def test_a_registered_metric_reaches_active_forgettings_table_1(
    toy_metric: str, tmp_path: Path
) -> None:
    assert toy_metric in scored_metrics("lm")  # evaluate_lm and relearn_new_tokens score it
    run, toy, sets = _run_folder(tmp_path)
    for s, items in zip(toy, sets, strict=True):
        c = {k: np.asarray(v) for k, v in items.columns.items()}
        assert s.value == pytest.approx(_nats_per_word(c["nll"].sum(), c["words"].sum()))
        assert s.ci_low is not None and s.ci_high is not None and s.ci_low < s.value < s.ci_high
    cfg = load_config(ROOT / "configs" / "active_forgetting_smoke.yaml")
    report = EXPERIMENTS.get(cfg.experiment).report(cfg, run).read_text("utf-8")
    # Table 1 family: the headline, token perplexity, then the toy metric (name order)
    title = "Table 1c: Toy nats per word by language group"
    assert title in report
    block = report[report.index(title) :].split("\n\n", 3)
    assert "(Lower is better)" in "\n\n".join(block[:3])  # the registration's direction
    assert "Toy nats per word per language" in report
    with open(run / "results" / f"table1_{NAME}.csv", encoding="utf-8") as f:
        rows = {r["Model"]: r for r in csv.DictReader(f)}
    for arm in ("Baseline", "BA", "AFA"):
        mine = [s.value for s in toy if s.model == arm]
        assert float(rows[arm]["mu_overall"]) == pytest.approx(np.mean(mine))
        assert rows[arm]["mu_overall_ci_low"]  # the stratified interval over the items
    # the paired test between two arms follows from the registration too
    afa = [s.statistic(NAME) for s in sets if s.model == "AFA"]
    ba = [s.statistic(NAME) for s in sets if s.model == "BA"]
    test = paired_bootstrap(afa, ba, n_resamples=300)
    assert test.effect < 0 and test.high < 0

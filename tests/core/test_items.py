"""Score interval fields and per-item evidence: round trips, selection, alignment, group
intervals.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from polymnesia.errors import DataError, PolymnesiaError
from polymnesia.items import (
    BootstrapConfig,
    ItemSet,
    aligned,
    group_intervals,
    interval_of,
    merge_run_items,
    read_items,
    run_items,
    score_with_items,
    select_items,
    write_items,
)
from polymnesia.metrics.uncertainty import Interval, stratified_bootstrap_ci
from polymnesia.results import Score, read_scores, score_from_dict, with_interval, write_scores


def test_score_interval_fields_round_trip_and_old_records_read(tmp_path: Path) -> None:
    s = Score("BA", "fr", "accuracy", 0.5, ci_low=0.4, ci_high=0.6, n=100, stderr=0.05)
    write_scores(tmp_path / "s.jsonl", [s, Score("BA", "de", "accuracy", 0.3)])
    back = read_scores(tmp_path / "s.jsonl")
    assert back[0] == s and back[0].has_ci
    assert back[1].ci_low is None and back[1].n is None and not back[1].has_ci
    line = json.loads((tmp_path / "s.jsonl").read_text().splitlines()[1])
    assert "ci_low" not in line  # unset fields stay out of the file
    old = {"model": "BA", "lang": "fr", "metric": "ppl", "value": 3}  # a record from before
    assert score_from_dict(old).ci_high is None
    with pytest.raises(DataError, match="'ci_low' must be a number"):
        score_from_dict({**old, "ci_low": "low"})
    with pytest.raises(DataError, match="'n' must be an integer"):
        score_from_dict({**old, "n": 2.5})


def test_with_interval_leaves_bounds_unset_without_spread() -> None:
    s = Score("BA", "fr", "accuracy", 0.5)
    got = with_interval(s, Interval(0.5, 0.4, 0.6, 80))
    assert (got.value, got.ci_low, got.ci_high, got.n) == (0.5, 0.4, 0.6, 80)
    flat = with_interval(s, Interval(0.5, math.nan, math.nan, 1))
    assert flat.ci_low is None and flat.n == 1


def _lm(model: str, lang: str, nll: list[float], group: str = "g") -> ItemSet:
    n = len(nll)
    cols = {"nll": nll, "tokens": [2.0] * n, "bytes": [4.0] * n, "words": [1.0] * n}
    return ItemSet(model, lang, "lm", list(range(n)), cols, group=group)


def test_items_round_trip_and_selection(tmp_path: Path) -> None:
    sets = [_lm("BA", "fr", [1.0, 2.0]), _lm("AFA", "fr", [1.5, 2.5])]
    entry = tmp_path / "cache" / "eval"  # a stage's cache entry
    entry.mkdir(parents=True)
    write_items(entry / "items.jsonl", sets)
    assert read_items(entry / "items.jsonl") == sets
    merge_run_items(tmp_path / "run", {"eval": entry})  # the runner, into the run folder
    assert run_items(tmp_path / "run") == [replace(s, stage="eval") for s in sets]
    assert run_items(tmp_path / "run", stage="other") == []
    assert run_items(tmp_path / "nothing") == []
    assert select_items(sets, model=["AFA"]) == sets[1:]
    with pytest.raises(PolymnesiaError, match="unknown item field"):
        select_items(sets, metric="x")
    with pytest.raises(DataError, match="ids but columns"):
        ItemSet("m", "fr", "label", [1, 2], {"pred": [1.0], "gold": [1.0]})
    with pytest.raises(PolymnesiaError, match="accepted: bits_per_byte"):
        sets[0].statistic("accuracy")


def test_lm_items_give_bits_per_byte_and_perplexity() -> None:
    s = _lm("BA", "fr", [2.0, 6.0])
    assert s.statistic("bits_per_byte").value() == pytest.approx(8 / (8 * math.log(2)))
    assert s.statistic("perplexity").value() == pytest.approx(math.exp(2.0))
    assert s.statistic("lm_loss").value() == pytest.approx(2.0)


def test_aligned_keeps_common_ids_in_one_order() -> None:
    a = ItemSet("A", "fr", "label", ["x", "y", "z"], {"pred": [1.0, 2.0, 3.0], "gold": [1.0, 1, 1]})
    b = ItemSet("B", "fr", "label", ["z", "x"], {"pred": [3.0, 1.0], "gold": [1.0, 1]})
    a2, b2 = aligned(a, b)
    assert a2.ids == b2.ids == ["x", "z"] and b2.columns["pred"] == [1.0, 3.0]
    with pytest.raises(DataError, match="share no test item"):
        aligned(a, ItemSet("B", "fr", "label", ["q"], {"pred": [1.0], "gold": [1.0]}))


def test_interval_of_and_score_with_items() -> None:
    items = ItemSet("m", "fr", "label", list(range(4)), {"pred": [1.0, 0, 1, 1], "gold": [1.0] * 4})
    cfg = BootstrapConfig(n_resamples=200, seed=1)
    iv = interval_of(items, "accuracy", cfg)
    assert iv.estimate == 0.75 and iv.n == 4 and iv.low <= 0.75 <= iv.high
    s = score_with_items(Score("m", "fr", "accuracy", 0.75), items, cfg)
    assert (s.ci_low, s.ci_high, s.n) == (iv.low, iv.high, 4)


def test_group_intervals_are_stratified_per_group_and_overall() -> None:
    sets = [
        _lm("BA", "fr", [1.0, 2.0, 3.0], "a"),
        _lm("BA", "de", [2.0, 2.0], "a"),
        _lm("BA", "sw", [5.0, 1.0, 1.0, 2.0], "b"),
    ]
    cfg = BootstrapConfig(n_resamples=300, seed=2)
    got = group_intervals(sets, "bits_per_byte", {"a": ["fr", "de"], "b": ["sw"]}, cfg)
    assert set(got) == {("BA", None, "a"), ("BA", None, "b"), ("BA", None, "overall")}
    want = stratified_bootstrap_ci(
        [s.statistic("bits_per_byte") for s in sets[:2]], n_resamples=300, seed=2
    )
    assert got[("BA", None, "a")] == want
    assert got[("BA", None, "overall")].n == 9
    with pytest.raises(DataError, match="several item sets"):
        group_intervals([*sets, sets[0]], "bits_per_byte", {"a": ["fr"]})


def test_group_intervals_keep_the_shared_items_of_seeds_crossed() -> None:
    # two seeds on 40 texts of fr; seed 1 has text 39 replaced by text 40: 39 texts crossed
    # (one resample shared by the seeds), each seed's last text resampled on its own
    nll = [float(1 + (i * 7) % 5) for i in range(41)]
    s0 = replace(_lm("BA", "fr", nll[:40]), seed=0)
    s1 = ItemSet(
        "BA",
        "fr",
        "lm",
        [*range(39), 40],
        {
            k: [v + 0.1 for v in vals]
            for k, vals in _lm("BA", "fr", nll[:39] + nll[40:]).columns.items()
        },
        group="g",
        seed=1,
    )
    got = group_intervals([s0, s1], "bits_per_byte", {}, BootstrapConfig(n_resamples=200))
    iv = got[("BA", None, "overall")]
    assert "39 shared by the seeds, the rest resampled per seed" in iv.method
    assert iv.low < iv.estimate < iv.high

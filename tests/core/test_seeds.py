"""Training seeds: one pipeline per seed with shared stages, records tagged by seed, the seed-noise
band.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from pydantic import ValidationError

from polymnesia.errors import ConfigError, DataError
from polymnesia.experiments.base import EXPERIMENTS, ExperimentConfig
from polymnesia.experiments.loading import load_config
from polymnesia.experiments.seed_records import (
    StageSeeds,
    legacy_seeds_from_names,
    run_stage_seeds,
    seeded_items,
    seeded_scores,
)
from polymnesia.experiments.seeds import (
    BandRecord,
    _fingerprints,
    band_of,
    config_fingerprint,
    fan_out,
    read_bands,
    seed_list,
    variance_note,
    with_seed_band,
    write_band,
)
from polymnesia.items import ItemSet, group_intervals, write_items
from polymnesia.pipeline.stage import StageSpec
from polymnesia.reports.cells import mean_cell
from polymnesia.reports.claims import Claim
from polymnesia.reports.evidence import arm_difference, arm_score
from polymnesia.reports.table_core import Estimate
from polymnesia.results import Score, write_scores

QUICKSTART = "configs/quickstart.yaml"


def _build(overrides: list[str]) -> tuple[Any, list[StageSpec]]:
    cfg = load_config(QUICKSTART, overrides)
    return cfg, EXPERIMENTS.get(cfg.experiment).build(cfg)


def test_one_seed_keeps_every_stage_name_and_fingerprint() -> None:
    cfg, specs = _build([])
    assert seed_list(cfg) == [0]
    plain = EXPERIMENTS.get(cfg.experiment).build_one(cfg)  # type: ignore[attr-defined]
    assert [s.name for s in specs] == [s.name for s in plain]
    assert _fingerprints(specs, {}) == _fingerprints(plain, {})
    # seeds: [0] is the same run as the default
    _, same = _build(["seeds=[0]"])
    assert _fingerprints(same, {}) == _fingerprints(specs, {})


def test_a_per_seed_protocol_refuses_another_protocols_config() -> None:
    lifelong = load_config("configs/lifelong_smoke.yaml")
    with pytest.raises(TypeError, match="LanguageModeling builds a LanguageModelingConfig"):
        EXPERIMENTS.get("language_modeling").build(lifelong)


def test_three_seeds_share_the_data_stage_and_copy_the_rest() -> None:
    _, one = _build([])
    _, three = _build(["seeds=[0,1,2]"])
    names = [s.name for s in three]
    assert names[: len(one)] == [s.name for s in one]
    assert "data.seed1" not in names  # data preparation takes no seed
    assert {"tokenizer.seed1", "pretrain.seed1", "evaluate.seed2"} <= set(names)
    by_name = {s.name: s for s in three}
    assert by_name["pretrain.seed2"].inputs == {"data": "data", "tokenizer": "tokenizer.seed2"}
    assert by_name["pretrain.seed2"].params.seed == 2
    # a later seed's copies are the stages a one-seed run with that seed builds: one cache entry
    _, solo = _build(["seed=1"])
    fps = dict(zip(names, _fingerprints(three, {}), strict=True))
    solo_fps = dict(zip([s.name for s in solo], _fingerprints(solo, {}), strict=True))
    assert fps["evaluate.seed1"] == solo_fps["evaluate"]
    assert fps["data"] == solo_fps["data"]


def test_seeds_are_checked_in_one_line() -> None:
    for bad, why in (("seeds=[]", "must not be empty"), ("seeds=[1,1]", "listed twice")):
        with pytest.raises(ConfigError, match=why):
            load_config(QUICKSTART, [bad])


def test_seeded_specs_carry_their_seeds_and_keep_their_fingerprints() -> None:
    _, three = _build(["seeds=[0,1,2]"])
    by_name = {s.name: s for s in three}
    assert (by_name["data"].seeds, by_name["data"].unseeded) == ((0, 1, 2), "data")
    assert (by_name["pretrain"].seeds, by_name["pretrain"].unseeded) == ((0,), "pretrain")
    assert (by_name["pretrain.seed2"].seeds, by_name["pretrain.seed2"].unseeded) == (
        (2,),
        "pretrain",
    )
    # the seeds are data about the run, not fingerprinted: the same specs without them (the
    # rule of a spec that names no seed) have the same fingerprints
    bare = [replace(s, seeds=(), unseeded="") for s in three]
    assert [s.seeds for s in bare] == [()] * len(three) and bare[1].unseeded == bare[1].name
    assert _fingerprints(three, {}) == _fingerprints(bare, {})
    one = EXPERIMENTS.get("language_modeling").build(load_config(QUICKSTART))
    assert {s.seeds for s in one} == {(0,)}
    assert [s.seed_record() for s in bare[:1]] == [{}]
    assert by_name["pretrain.seed1"].seed_record() == {"seeds": [1], "unseeded": "pretrain"}


def test_a_stage_is_read_by_the_seeds_it_records_not_by_its_name(tmp_path: Path) -> None:
    # contrived: a stage named like seed 1's copy that serves seed 0, and the other way round
    s = lambda m, v: Score(m, "fr", "accuracy", v, task="t")  # noqa: E731
    run = _run(tmp_path, {"x.seed1": [s("A", 0.8)], "x": [s("A", 0.7)], "d": [s("c", 0.5)]}, {})
    stages = {"x.seed1": ([0], "x"), "x": ([1], "x"), "d": ([0, 1], "d")}
    record = {"stages": {n: {"seeds": k, "unseeded": u} for n, (k, u) in stages.items()}}
    (run / "run.json").write_text(json.dumps(record))
    got = sorted((r.value, r.seed) for r in seeded_scores(run, [0, 1]))
    assert got == [(0.5, 0), (0.5, 1), (0.7, 1), (0.8, 0)]
    assert run_stage_seeds(record, [0, 1])["x.seed1"] == StageSeeds((0,), "x")
    bad = {"stages": {"x": {"seeds": ["one"]}}}
    with pytest.raises(DataError, match="stage x's seeds \\['one'\\] are not a list of int"):
        run_stage_seeds(bad, [0, 1])


def test_legacy_run_folders_read_their_seeds_from_stage_names() -> None:
    # run.json written before stages recorded their seeds: the old name rule
    names = ["data", "pretrain", "eval", "pretrain.seed1", "eval.seed1", "pretrain.seed2"]
    got = legacy_seeds_from_names(names, [0, 1, 2])
    assert got["data"] == StageSeeds((0, 1, 2), "data")
    assert got["pretrain"] == StageSeeds((0,), "pretrain")
    assert got["eval"].seeds == (0, 2)  # seed 2 has no eval of its own, so it shares seed 0's
    assert got["pretrain.seed1"] == StageSeeds((1,), "pretrain")
    assert got["eval.seed1"] == StageSeeds((1,), "eval")
    record = {"stages": {n: {"kind": "k"} for n in names}}
    assert run_stage_seeds(record, [0, 1, 2]) == got  # no stage records seeds: the old rule


def _run(tmp_path: Path, stages: dict[str, list[Score]], items: dict[str, list[ItemSet]]) -> Path:
    run = tmp_path / "run"
    (run / "results").mkdir(parents=True)
    records = [replace(s, stage=name) for name, recs in stages.items() for s in recs]
    write_scores(run / "results" / "scores.jsonl", records)
    sets = [replace(i, stage=name) for name, found in items.items() for i in found]
    write_items(run / "results" / "items.jsonl", sets)
    (run / "run.json").write_text(json.dumps({"stages": {n: {} for n in stages}}))
    return run


def _items(model: str, p: float, seed: int, n: int = 60) -> ItemSet:
    correct = (np.random.default_rng(seed).random(n) < p).astype(float).tolist()
    return ItemSet(model, "fr", "values", list(range(n)), {"values": correct}, task="t")


def test_seeded_scores_and_items_carry_their_stage_seed(tmp_path: Path) -> None:
    s = lambda m, v: Score(m, "fr", "accuracy", v, task="t")  # noqa: E731
    run = _run(
        tmp_path,
        {"base": [s("chance", 0.5)], "eval": [s("A", 0.8)], "eval.seed1": [s("A", 0.7)]},
        {"eval": [_items("A", 0.8, 0)], "eval.seed1": [_items("A", 0.7, 1)]},
    )
    one = seeded_scores(run, [0])
    assert [r.seed for r in one] == [None, None, None]  # one seed: the merged file as it is
    got = sorted((r.model, r.value, r.seed) for r in seeded_scores(run, [0, 1]))
    assert got == [("A", 0.7, 1), ("A", 0.8, 0), ("chance", 0.5, 0), ("chance", 0.5, 1)]
    assert sorted(i.seed for i in seeded_items(run, [0, 1])) == [0, 1]  # type: ignore[type-var]
    assert [i.seed for i in seeded_items(run, [0])] == [None, None]


def test_several_seeds_resample_seeds_and_items_together(tmp_path: Path) -> None:
    s = lambda m, v, k: Score(m, "fr", "accuracy", v, task="t", seed=k)  # noqa: E731
    scores = [s("A", 0.8, 0), s("A", 0.7, 1), s("B", 0.5, 0), s("B", 0.52, 1)]
    items = [_items("A", 0.8, 0), _items("A", 0.7, 1), _items("B", 0.5, 2), _items("B", 0.5, 3)]
    items = [
        ItemSet(i.model, i.lang, i.kind, i.ids, i.columns, task="t", seed=k)
        for i, k in zip(items, [0, 1, 0, 1], strict=True)
    ]
    test = arm_difference(scores, items, "accuracy", "A", "B")
    assert test.method.startswith("paired seeds and items: t over 2 training seeds")
    assert "bootstrap over 60 items" in test.method
    iv = arm_score(scores, items, "accuracy", "A")
    assert iv.method.startswith("seeds and items: t over 2 training seeds")
    # without item sets, several seeds fall back to the t-test over seeds
    assert "t-test" in arm_difference(scores, [], "accuracy", "A", "B").method


def _claim(effect: float, cid: str = "x.a_beats_b") -> Claim:
    return Claim(
        "A beats B", +1, effect, effect - 0.005, effect + 0.005, 100, "paired bootstrap", id=cid
    )


def _band(cfg: Any, effects: dict[str, dict[int, float]]) -> BandRecord:
    return BandRecord(
        cfg.experiment,
        config_fingerprint(cfg),
        "c.yaml",
        "0" * 40,
        "2026-12-01",
        "test",
        effects,
        {k: "A beats B" for k in effects},
    )


def test_a_one_seed_claim_is_judged_with_the_band_of_the_other_seeds() -> None:
    cfg = load_config(QUICKSTART)
    band = _band(cfg, {"x.a_beats_b": {0: 0.5, 1: 0.010, 2: 0.014, 3: 0.012}})
    # seed 0 (an outlier) is left out of its own band: sd of 0.010, 0.014, 0.012 over 2 df
    judged = with_seed_band([_claim(0.05)], cfg, band)[0]
    assert judged.noise is not None and judged.noise.seeds == (1, 2, 3)
    assert judged.noise.sd == pytest.approx(0.002) and judged.noise.df == 2
    assert judged.verdict == "holds"  # far beyond so small a band
    seed1 = with_seed_band([_claim(0.05)], load_config(QUICKSTART, ["seed=1"]), band)[0]
    assert seed1.noise is not None and seed1.noise.seeds == (0, 2, 3)  # seed 0's effect in
    assert seed1.noise.sd > 0.2 and seed1.verdict == "inconclusive"  # the band goes both ways
    assert with_seed_band([_claim(-0.05)], load_config(QUICKSTART, ["seed=1"]), band)[
        0
    ].verdict == ("inconclusive")
    # a claim the band does not hold, or a band of one other seed, is not measured
    other = with_seed_band([_claim(0.05, "x.other")], cfg, band)[0]
    assert other.verdict == "seed noise not measured" and "seeds: [0, 1, 2]" in other.reason
    thin = _band(cfg, {"x.a_beats_b": {0: 0.1, 1: 0.2}})
    assert with_seed_band([_claim(0.05)], cfg, thin)[0].verdict == "seed noise not measured"
    # with several seeds the intervals cover the seeds: no band, nothing unmeasured
    seeded = load_config(QUICKSTART, ["seeds=[0,1]"])
    assert with_seed_band([_claim(-0.05)], seeded, band)[0].verdict == "contradicted"
    assert "training seeds and test items" in variance_note(seeded)
    note = variance_note(cfg, band)
    assert "items only" in note and "seeds 0, 1, 2, 3 of c.yaml" in note
    assert "other than seed 0" in note


def test_a_config_without_its_own_band_gets_none() -> None:
    cfg = load_config(QUICKSTART)
    assert band_of(cfg) is None  # no run of the quickstart's content measured its seeds
    claim = with_seed_band([_claim(0.05)], cfg)[0]
    assert claim.verdict == "seed noise not measured"
    note = variance_note(cfg)
    assert "No seed noise is measured for this config's content" in note
    assert "seeds: [0, 1, 2]" in note
    assert "seed noise" not in variance_note(cfg, claims=False)  # a report without claims
    precondition = replace(_claim(0.05), kind="precondition")
    assert with_seed_band([precondition], cfg)[0].verdict == "holds"  # no band on a setup check
    with pytest.raises(ConfigError, match="seed_noise_band is no longer read"):
        load_config(QUICKSTART, ["seed_noise_band=0.02"])


def test_band_records_are_keyed_by_content_not_name(tmp_path: Path) -> None:
    cfg = load_config(QUICKSTART)
    band = _band(cfg, {"x.a_beats_b": {0: 0.1, 1: 0.2, 2: 0.15}})
    path = write_band(band, tmp_path)
    assert path.name == f"language_modeling-{band.fingerprint[:16]}.json"
    assert read_bands(tmp_path) == [band]
    assert band_of(load_config(QUICKSTART, ["name=renamed", "seed=4"]), tmp_path) == band
    bigger = load_config(QUICKSTART, ["train.steps=600"])
    assert config_fingerprint(bigger) != band.fingerprint and band_of(bigger, tmp_path) is None
    (tmp_path / "bad.json").write_text('{"version": 1, "claims": {}}', encoding="utf-8")
    with pytest.raises(DataError, match="not a seed-noise band record"):
        read_bands(tmp_path)


def test_the_shipped_bands_reach_their_configs() -> None:
    """Each shipped band names a config; where that config's content is still the one
    measured, the config finds it (a renamed copy does too)."""
    configs = Path(__file__).resolve().parents[2] / "configs"
    records = read_bands()
    assert records
    found = {r.config for r in records if band_of(load_config(configs / Path(r.config).name)) == r}
    assert "configs/two_phase.yaml" in found and "configs/lifelong_baselines.yaml" in found
    # lifelong_smoke and lifelong_paper are not lifelong_baselines: no band borrowed
    assert band_of(load_config(configs / "lifelong_smoke.yaml")) is None
    assert band_of(load_config(configs / "two_phase_smoke.yaml")) != band_of(
        load_config(configs / "two_phase.yaml")
    )  # each size its own


def test_fan_out_refuses_a_stage_listed_before_its_input() -> None:
    cfg, specs = _build(["seeds=[0,1]"])
    with pytest.raises(ConfigError, match="before they are built"):
        fan_out(cfg, lambda c: list(reversed(EXPERIMENTS.get(c.experiment).build_one(c))))  # type: ignore[attr-defined]


def test_group_intervals_of_seed_tagged_items_resample_seeds_and_items() -> None:
    def tagged(model: str, lang: str, p: float, seed: int) -> ItemSet:
        i = _items(model, p, 10 * seed + len(lang))
        return ItemSet(model, lang, "values", i.ids, i.columns, seed=seed)

    sets = [tagged("A", lang, p, k) for k, p in ((0, 0.2), (1, 0.8)) for lang in ("fr", "de")]
    ivs = group_intervals(sets, "accuracy", {"g": ["fr", "de"]})
    iv = ivs[("A", None, "g")]
    assert iv.method.startswith("seeds and items: t over 2 training seeds")
    one = group_intervals([s for s in sets if s.seed == 0], "accuracy", {"g": ["fr", "de"]})
    assert one[("A", None, "g")].method.startswith("stratified")
    assert iv.high - iv.low > one[("A", None, "g")].high - one[("A", None, "g")].low
    # a group cell over seeds takes that interval, not the t-interval over seeds
    recs = [Score("A", s.lang, "accuracy", 0.5, seed=s.seed) for s in sets]
    cell = mean_cell({"fr": recs[0::2], "de": recs[1::2]}, iv)
    assert isinstance(cell, Estimate) and cell.method == iv.method
    untagged = [ItemSet("A", "fr", "values", [0], {"values": [1.0]})] * 2
    with pytest.raises(DataError, match="several item sets"):
        group_intervals(untagged, "accuracy", {"g": ["fr"]})


def test_group_intervals_match_a_seeds_items_by_id() -> None:
    """A seed that lists the same items in another order is read in the first seed's order
    (one shared item resample); seeds on different items are resampled on their own."""
    rng = np.random.default_rng(3)
    base = {lang: rng.random(30) for lang in ("fr", "de")}
    ids = [f"v{i}" for i in range(30)]
    flip = list(rng.permutation(30))

    def sets(order: list[int], shift: float, names: list[str] = ids) -> list[ItemSet]:
        return [
            ItemSet(
                "A",
                lang,
                "values",
                [names[i] for i in order],
                {"values": list(v[order] + shift)},
                seed=1,
            )
            for lang, v in base.items()
        ]

    first = [replace(s, seed=0) for s in sets(list(range(30)), 0.0)]
    same = group_intervals(first + sets(list(range(30)), 0.1), "values", {"g": ["fr", "de"]})
    moved = group_intervals(first + sets(flip, 0.1), "values", {"g": ["fr", "de"]})
    a, b = same[("A", None, "g")], moved[("A", None, "g")]
    assert "shared by the seeds" in b.method
    assert (b.estimate, b.low, b.high) == pytest.approx((a.estimate, a.low, a.high))
    other = [f"w{i}" for i in range(30)]
    nested = group_intervals(first + sets(flip, 0.1, other), "values", {"g": ["fr", "de"]})
    assert "resampled per seed" in nested[("A", None, "g")].method


def test_a_group_of_some_languages_reads_their_shared_counts() -> None:
    """Seeds sharing some items in each language (a partly crossed design, per-language
    counts): a group of some of the languages is resampled with those languages' counts,
    as the same items on their own give (it was refused: the counts of every language did
    not fit the group's strata)."""
    rng = np.random.default_rng(5)
    n = {"fr": 20, "de": 30, "sw": 25}
    base = {lang: rng.random(k) for lang, k in n.items()}

    def seed_sets(seed: int, own: int) -> list[ItemSet]:
        out = []
        for lang, v in base.items():  # the first `own` ids differ between seeds
            ids = [f"{lang}{i}" if i >= own else f"{lang}{i}s{seed}" for i in range(n[lang])]
            out.append(
                ItemSet("A", lang, "values", ids, {"values": list(v + 0.1 * seed)}, seed=seed)
            )
        return out

    sets = seed_sets(0, 5) + seed_sets(1, 5)
    ivs = group_intervals(sets, "values", {"g": ["de", "fr"], "one": ["sw"]})
    alone = group_intervals(
        [s for s in sets if s.lang in ("de", "fr")], "values", {"g": ["de", "fr"]}
    )
    for key in (("A", None, "g"), ("A", None, "one"), ("A", None, "overall")):
        assert "shared by the seeds" in ivs[key].method and ivs[key].low < ivs[key].high
    a, b = ivs[("A", None, "g")], alone[("A", None, "g")]
    assert (a.estimate, a.low, a.high) == pytest.approx((b.estimate, b.low, b.high))


def test_protocols_whose_reports_read_one_seed_refuse_several_before_training() -> None:
    class OneSeed(ExperimentConfig):
        experiment: str = "one_seed"
        max_seeds: ClassVar[int | None] = 1

    with pytest.raises(ValidationError, match="report reads one training seed; run each seed"):
        OneSeed(name="o", seeds=[0, 1])
    assert OneSeed(name="o", seeds=[3]).seeds == [3]
    one = load_config("configs/lifelong_smoke.yaml", ["seeds=[3]"])
    assert all(getattr(s.params, "seed", 3) == 3 for s in EXPERIMENTS.get("lifelong").build(one))
    two = EXPERIMENTS.get("lifelong").build(
        load_config("configs/lifelong_smoke.yaml", ["seeds=[0,1]"])
    )
    assert {getattr(s.params, "seed", None) for s in two} >= {0, 1}


def test_a_protocol_that_does_not_read_seeds_refuses_them() -> None:
    class Plain(ExperimentConfig):
        experiment: str = "plain"

    assert Plain(name="p", seed=2).seed == 2
    with pytest.raises(ValidationError, match="does not read seeds; set seed"):
        Plain(name="p", seeds=[2])


def test_every_training_seed_is_scored_on_the_same_test_sample() -> None:
    """active_forgetting samples its test verses (translation, zero-shot), isotropy's random
    pairs and lm-eval's few-shot draws with downstream.sample_seed, not the training seed:
    the stages of seed 1 read seed 1's models with seed 0's parameters."""
    cfg = load_config("configs/active_forgetting_smoke.yaml", ["seeds=[0,1]"])
    specs = {s.name: s for s in EXPERIMENTS.get(cfg.experiment).build(cfg)}
    for kind in ("translation", "zero_shot", "isotropy"):
        first, later = specs[f"{kind}_AFA"], specs[f"{kind}_AFA.seed1"]
        assert first.params == later.params, kind
        assert first.inputs != later.inputs  # the models differ
    assert specs["pretrain"].params != specs["pretrain.seed1"].params  # training does not
    moved = load_config("configs/active_forgetting_smoke.yaml", ["downstream.sample_seed=3"])
    spec = {s.name: s for s in EXPERIMENTS.get(moved.experiment).build(moved)}["zero_shot_AFA"]
    assert spec.params.seed == 3

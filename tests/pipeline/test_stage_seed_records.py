"""A stage spec carries the training seeds it serves as data: not fingerprinted, and written by
the runner into the stage's record in ``run.json``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from polymnesia.config.base import StrictModel
from polymnesia.experiments.seed_records import seed_view, seeded_run, seeded_scores
from polymnesia.io import atomic_write_text
from polymnesia.pipeline.runner import plan, run_pipeline
from polymnesia.pipeline.stage import STAGES, Stage, StageContext, StageSpec
from polymnesia.reports.frame import load_run
from polymnesia.results import Score


class Params(StrictModel):
    value: int


@STAGES.register("test_seed_write", "writes its value and scores it (tests only)")
class Write(Stage[Params]):
    def run(self, ctx: StageContext[Params]) -> list[Score]:
        atomic_write_text(ctx.out_dir / "value.txt", str(ctx.params.value))
        return [Score("m", "en", "value", float(ctx.params.value))]


def _specs() -> list[StageSpec]:
    """A stage both seeds share, seed 0's stage and seed 1's copy of it."""
    return [
        StageSpec("data", "test_seed_write", Params(value=1), seeds=[0, 1]),
        StageSpec("train", "test_seed_write", Params(value=2), {"src": "data"}, seeds=[0]),
        StageSpec(
            "train.seed1",
            "test_seed_write",
            Params(value=3),
            {"src": "data"},
            seeds=[1],
            unseeded="train",
        ),
    ]


def test_seeds_do_not_enter_the_fingerprint(isolated_cache: Path) -> None:
    seeded = _specs()
    bare = [StageSpec(s.name, s.kind, s.params, s.inputs) for s in seeded]
    assert [s.seeds for s in bare] == [(), (), ()] and bare[2].unseeded == "train.seed1"
    assert [p.fingerprint for p in plan(seeded)] == [p.fingerprint for p in plan(bare)]
    other = [replace(s, seeds=(7,), unseeded="elsewhere") for s in seeded]
    assert [p.fingerprint for p in plan(other)] == [p.fingerprint for p in plan(bare)]
    # what does enter it still does
    assert (
        plan([replace(seeded[0], params=Params(value=9))])[0].fingerprint
        != plan(bare)[0].fingerprint
    )


def test_the_runner_records_each_stages_seeds_in_run_json(
    isolated_cache: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"experiment": "x", "stages": {}}))
    specs = [*_specs(), StageSpec("extra", "test_seed_write", Params(value=4))]
    run_pipeline(specs, run, log=lambda m: None)
    stages = json.loads((run / "run.json").read_text())["stages"]
    assert (stages["data"]["seeds"], stages["data"]["unseeded"]) == ([0, 1], "data")
    assert (stages["train"]["seeds"], stages["train"]["unseeded"]) == ([0], "train")
    assert (stages["train.seed1"]["seeds"], stages["train.seed1"]["unseeded"]) == ([1], "train")
    assert "seeds" not in stages["extra"] and "unseeded" not in stages["extra"]  # says none
    assert stages["train.seed1"]["status"] == "run"


def test_a_stage_named_like_another_seeds_copy_is_read_by_its_seeds(
    isolated_cache: Path, tmp_path: Path
) -> None:
    # contrived: "x.seed1" serves seed 0 and "x" seed 1; the report reads the records' seeds
    # from run.json, never from the names
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({"experiment": "x", "stages": {}}))
    specs = [
        StageSpec("x.seed1", "test_seed_write", Params(value=10), seeds=[0], unseeded="x"),
        StageSpec("x", "test_seed_write", Params(value=11), seeds=[1]),
    ]
    run_pipeline(specs, run, log=lambda m: None)
    got = sorted((s.stage, s.seed) for s in seeded_scores(run, [0, 1]) if s.metric == "value")
    assert got == [("x", 1), ("x.seed1", 0)]
    assert [s.stage for s in seed_view(load_run(run), 0, [0, 1]).scores()] == []  # untagged
    tagged = seeded_run(load_run(run), [0, 1])
    assert [(s.stage, s.value) for s in seed_view(tagged, 0, [0, 1]).scores()] == [("x", 10.0)]
    assert [(s.stage, s.value) for s in seed_view(tagged, 1, [0, 1]).scores()] == [("x", 11.0)]

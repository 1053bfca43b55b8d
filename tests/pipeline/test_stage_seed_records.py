"""A stage spec carries the training seeds it serves as data: not fingerprinted, and written by
the runner into the stage's record in ``run.json``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from polymnesia.config.base import StrictModel
from polymnesia.io import atomic_write_text
from polymnesia.pipeline.runner import plan, run_pipeline
from polymnesia.pipeline.stage import STAGES, Stage, StageContext, StageSpec
from polymnesia.results import Score


class Params(StrictModel):
    value: int


@STAGES.register("test_seed_write", "writes its value (tests only)")
class Write(Stage[Params]):
    def run(self, ctx: StageContext[Params]) -> list[Score]:
        atomic_write_text(ctx.out_dir / "value.txt", str(ctx.params.value))
        return []


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

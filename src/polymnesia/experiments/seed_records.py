"""Which training seeds each stage and record of a run belong to, read from the run folder.

A spec carries the seeds it serves (:attr:`~polymnesia.pipeline.stage.StageSpec.seeds`, set
where seeds fan out, :func:`polymnesia.experiments.seeds.fan_out`), and the runner writes them
with the stage's name in its seed's own pipeline (``unseeded``) into the stage's record in
``run.json``. :func:`run_stage_seeds` reads them back; :func:`seeded_scores`,
:func:`seeded_items` and :func:`seeded_run` tag each record (stages do not all tag their
score records and item sets with the seed they ran with) with the seeds of the stage that wrote
it, and :func:`seed_view` reads one seed's records under its own pipeline's stage names. No
stage name is parsed for a seed, but in a run folder written before stages recorded their
seeds (:func:`legacy_seeds_from_names`, the old name rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

from polymnesia.errors import ConfigError, DataError
from polymnesia.experiments.seeds import seed_stage_name
from polymnesia.io import read_json_object
from polymnesia.items import ItemSet, run_items
from polymnesia.reports.frame import RunTable
from polymnesia.results import Score, read_scores


@dataclass(frozen=True)
class StageSeeds:
    """What a run folder's ``run.json`` says of one stage's seeds: the training seeds it serves
    (several for a stage they share) and its name in one seed's own pipeline."""

    seeds: tuple[int, ...]
    unseeded: str


def run_stage_seeds(record: Mapping[str, Any], seeds: Sequence[int]) -> dict[str, StageSeeds]:
    """Each stage's seeds, by stage name, from a run record (``run.json``: the ``seeds`` and
    ``unseeded`` the runner writes from each :class:`StageSpec`). A run folder written before
    stages recorded their seeds is read by :func:`legacy_seeds_from_names`."""
    if not seeds:
        raise ConfigError("need at least one seed")
    stages = record.get("stages")
    if not isinstance(stages, Mapping):
        raise DataError("run.json is missing or damaged (no stages); run the experiment")
    if not stages or not all(isinstance(r, Mapping) and "seeds" in r for r in stages.values()):
        return legacy_seeds_from_names(list(stages), seeds)
    out = {}
    for name, r in stages.items():
        try:
            out[name] = StageSeeds(tuple(int(s) for s in r["seeds"]), str(r.get("unseeded", name)))
        except (TypeError, ValueError):
            raise DataError(
                f"run.json: stage {name}'s seeds {r['seeds']!r} are not a list of integers"
            ) from None
    return out


def legacy_seeds_from_names(
    stage_names: Sequence[str], seeds: Sequence[int]
) -> dict[str, StageSeeds]:
    """LEGACY: each stage's seeds read from its name, for a run folder whose ``run.json`` was
    written before stages recorded their seeds (the one place that parses a stage name for a
    seed; a run folder written since reads them from ``run.json``, :func:`run_stage_seeds`).

    ``NAME.seedS`` (when ``NAME`` is a stage too) belongs to seed S and is ``NAME`` in its
    seed's pipeline; a first-seed stage ``NAME`` belongs to the first seed and to every later
    seed that has no ``NAME.seedS`` of its own (a stage the seed does not reach is shared)."""
    names = set(stage_names)
    tags = {seed_stage_name("", s): s for s in seeds[1:]}
    out: dict[str, StageSeeds] = {}
    for name in stage_names:
        own = next((s for tag, s in tags.items() if name.endswith(tag)), None)
        base = name[: -len(seed_stage_name("", own))] if own is not None else name
        if own is not None and base in names:
            out[name] = StageSeeds((own,), base)
        else:
            later = (s for s in seeds[1:] if seed_stage_name(name, s) not in names)
            out[name] = StageSeeds((seeds[0], *later), name)
    return out


def _run_record(run_dir: Path) -> dict[str, Any]:
    record = read_json_object(run_dir / "run.json")
    if record is None:
        raise DataError(f"{run_dir}/run.json is missing or damaged; run the experiment")
    return record


def seeded_scores(run_dir: Path, seeds: Sequence[int]) -> list[Score]:
    """The run's score records (``results/scores.jsonl``), each tagged with the training seed
    of the stage that wrote it (once per seed for a stage shared by all seeds); a record that
    already names its seed keeps it. One seed: the records as they are."""
    scores = read_scores(run_dir / "results" / "scores.jsonl")
    if len(seeds) < 2:
        return scores
    return _tag_seeds(scores, run_stage_seeds(_run_record(run_dir), seeds), "score records")


def seeded_items(run_dir: Path, seeds: Sequence[int]) -> list[ItemSet]:
    """The run's item sets (:func:`polymnesia.items.run_items`), each tagged with the seed of
    the stage that wrote it as :func:`seeded_scores` tags records (one seed: as they are)."""
    sets = run_items(run_dir)
    if len(seeds) < 2:
        return sets
    return _tag_seeds(sets, run_stage_seeds(_run_record(run_dir), seeds), "item sets")


def seeded_run(run: RunTable, seeds: Sequence[int]) -> RunTable:
    """The run's table (:func:`polymnesia.reports.frame.load_run`) with its score records and
    item sets tagged as :func:`seeded_scores` and :func:`seeded_items` tag them (one seed: the
    table as it is)."""
    if len(seeds) < 2:
        return run
    owners = run_stage_seeds(run.record, seeds)
    scores = _tag_seeds(run.scores(), owners, "score records")
    return run.with_records(scores, _tag_seeds(run.items(), owners, "item sets"))


def seed_view(run: RunTable, seed: int, seeds: Sequence[int]) -> RunTable:
    """The records of training seed ``seed`` of a run tagged by :func:`seeded_run`, each
    stage named as its seed's own pipeline names it (``run.json``'s ``unseeded``: a later
    seed's ``pretrain.seed1`` reads as ``pretrain``), so one seed reads like a one-seed run."""
    owners = run_stage_seeds(run.record, seeds)

    def unseeded(stage: str | None) -> str | None:
        return owners[stage].unseeded if stage is not None and stage in owners else stage

    scores = [replace(s, stage=unseeded(s.stage)) for s in run.scores() if s.seed == seed]
    items = [replace(s, stage=unseeded(s.stage)) for s in run.items() if s.seed == seed]
    return run.with_records(scores, items)


_Seeded = TypeVar("_Seeded", Score, ItemSet)


def _tag_seeds(
    records: Sequence[_Seeded], owners: Mapping[str, StageSeeds], what: str
) -> list[_Seeded]:
    out: list[_Seeded] = []
    for rec in records:
        if rec.seed is not None:
            out.append(rec)
        elif rec.stage is None or rec.stage not in owners:
            raise DataError(
                f"{what} of {rec.model} name no stage of this run; run the experiment "
                "again (it reuses every stage) to merge them with their stages"
            )
        else:
            out += [replace(rec, seed=s) for s in owners[rec.stage].seeds]
    return out

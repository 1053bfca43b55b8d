"""Training seeds: one pipeline per seed, stages shared where the seed does not reach them.

A protocol's config takes ``seeds: [..]`` (:class:`~polymnesia.experiments.base.ExperimentConfig`).
:func:`fan_out` builds the protocol once per seed (the config with ``seed`` set to it). The
first seed's stages keep their names and specs, so a one-seed run has exactly the stages and
fingerprints it had before seeds existed. Every later seed's stage whose fingerprint equals a
first-seed stage's (data preparation: it takes no seed) is that stage, shared; any other is
added as ``NAME.seedS``. The cache then computes each distinct stage once.

Stages do not all tag their score records and item sets with the seed they ran with, so
:func:`seeded_scores` and :func:`seeded_items` tag each merged record of the run folder (which
names its stage) with the seed its stage belongs to (a stage shared by every seed gives its
records to each seed). With one seed they return the run's records as they are.

With several seeds, intervals and paired tests cover seeds and test items together (item
bootstrap variance plus the variance over seeds, Student t; :mod:`polymnesia.metrics.uncertainty`,
chosen in :mod:`polymnesia.reports.evidence`). With one seed they cover the test items only, and a
claim whose effect lies within the protocol's *seed-noise band* (:data:`SEED_NOISE_BANDS`,
measured with 3 seeds at laptop scale; docs/<protocol>.md, "Seed noise") is not called
contradicted (:func:`with_seed_band`, verdict "within seed noise").
"""

from __future__ import annotations

import json
import math
import re
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from polymnesia.errors import ConfigError, DataError
from polymnesia.experiments.base import Experiment, ExperimentConfig
from polymnesia.items import ItemSet, run_items
from polymnesia.pipeline.stage import StageSpec
from polymnesia.reports.claims import Claim
from polymnesia.reports.frame import RunTable
from polymnesia.results import Score, read_scores

C = TypeVar("C", bound=ExperimentConfig)

#: the name of a later seed's own copy of stage NAME is NAME + SEED_TAG + seed
SEED_TAG = ".seed"


@dataclass(frozen=True)
class SeedBand:
    """A protocol's seed-noise band: how far a claim's effect moves with the training seed alone.

    ``per_claim`` is, for each claim tested in every seed, twice the standard deviation of
    its effect over ``n_seeds`` training seeds (so a one-seed effect within that of the
    claim's boundary can be seed noise); ``band`` is the largest of them. A claim the
    measurement did not have gets no band. Measured on ``config`` at ``commit``
    (``docs/runs/seed_noise_PROTOCOL.json``).
    """

    band: float
    n_seeds: int
    config: str
    commit: str
    date: str
    per_claim: Mapping[str, float] = field(default_factory=dict)

    def of(self, statement: str) -> float | None:
        """The band of the claim ``statement`` (None for one not measured); numbers in it (a
        LoRA rank, a count) do not matter, so a smoke run's bands serve the default config."""
        return self.per_claim.get(claim_key(statement))


#: measured seed-noise bands (docs/<protocol>.md, "Seed noise"; tests/reports/test_measured_runs.py
#: checks them against docs/runs/seed_noise_PROTOCOL.json); a protocol missing here has no
#: measured band, and a config's ``seed_noise_band`` sets one for every claim
SEED_NOISE_BANDS: dict[str, SeedBand] = {
    "active_forgetting": SeedBand(
        band=0.0976,
        n_seeds=3,
        config="configs/active_forgetting_smoke.yaml",
        commit="1c6073acf0fdc109d0b0b8910143392abe176b04",
        date="2026-11-26",
        per_claim={
            "AFA has lower bits_per_byte than Baseline (all languages)": 0.0266,
            "AFA has lower bits_per_byte than BA (all languages)": 0.008,
            "BA has higher bits_per_byte than Baseline on the 'other' languages (vocabulary "
            "expansion hurts languages it did not add)": 0.0342,
            "AFA has lower self-similarity (more isotropic) than Baseline": 0.0716,
            "AFA has lower self-similarity (more isotropic) than BA": 0.0976,
        },
    ),
    "lifelong": SeedBand(
        band=0.4422,
        n_seeds=3,
        config="configs/lifelong_baselines.yaml",
        commit="562c8e45f224b0e267196298a4a0a717f9384125",
        date="2026-11-26",
        per_claim={
            "VANILLA forgets: CBT < #": 0.2416,
            "L#-SP forgets less than VANILLA (higher CBT)": 0.2688,
            "EWC forgets less than VANILLA (higher CBT)": 0.133,
            "LwF forgets less than VANILLA (higher CBT)": 0.4422,
            "MERGE forgets less than VANILLA (higher CBT)": 0.3532,
            "REPLAY forgets less than VANILLA (higher CBT)": 0.2078,
            "non-Latin scripts are more fragile receivers than Latin ones (VANILLA, mean MBT)": (
                0.1426
            ),
            "Latin scripts are stronger donors than non-Latin ones (VANILLA, mean MFT)": 0.065,
        },
    ),
    "two_phase": SeedBand(
        band=0.0484,
        n_seeds=3,
        config="configs/two_phase_smoke.yaml",
        commit="519d896889e5d470871f7b735e1ace8c34b890ea",
        date="2026-11-26",
        per_claim={
            "Phase # on english teaches the English tasks (EA above the base)": 0.0484,
            "CFT beats the mixture (english -> similar), mean of EA and MA": 0.0,
            "Phase # on a similar set keeps English ability, within the margin of #.# "
            "(english -> similar)": 0.0,
            "CFT beats the mixture (english -> dissimilar), mean of EA and MA": 0.0,
            "Phase # on a dissimilar set loses English ability (english -> dissimilar)": 0.0484,
            "LoRA gains less multilingual ability than full CFT": 0.0484,
        },
    ),
}


#: bands measured on one shipped config at its own size, keyed by protocol and config name: a
#: run of a config of that name is judged by its own band rather than the protocol's, which
#: may come from a config of another size (a smoke config's seed noise may be wider or narrower)
CONFIG_SEED_NOISE_BANDS: dict[tuple[str, str], SeedBand] = {
    ("active_forgetting", "active_forgetting"): SeedBand(
        band=0.2092,
        n_seeds=3,
        config="configs/active_forgetting.yaml",
        commit="1c6073acf0fdc109d0b0b8910143392abe176b04",
        date="2026-11-26",
        per_claim={
            "AFA has lower bits_per_byte than Baseline (all languages)": 0.0578,
            "AFA has lower bits_per_byte than BA (all languages)": 0.0346,
            "BA has higher bits_per_byte than Baseline on the 'other' languages (vocabulary "
            "expansion hurts languages it did not add)": 0.2092,
            "AFA has lower self-similarity (more isotropic) than Baseline": 0.0144,
            "AFA has lower self-similarity (more isotropic) than BA": 0.011,
        },
    ),
    ("lifelong", "lifelong"): SeedBand(
        band=0.041,
        n_seeds=3,
        config="configs/lifelong.yaml",
        commit="69014532cb9289305c1b6a9f9321506b338b8148",
        date="2026-11-26",
        per_claim={
            "MULTI has the best final score of all methods": 0.0168,
            "VANILLA forgets: CBT < #": 0.0186,
            "non-Latin scripts are more fragile receivers than Latin ones (VANILLA, mean MBT)": (
                0.0136
            ),
            "Latin scripts are stronger donors than non-Latin ones (VANILLA, mean MFT)": 0.041,
        },
    ),
    ("two_phase", "two_phase"): SeedBand(
        band=0.2132,
        n_seeds=3,
        config="configs/two_phase.yaml",
        commit="69014532cb9289305c1b6a9f9321506b338b8148",
        date="2026-11-26",
        per_claim={
            "Phase # on english teaches the English tasks (EA above the base)": 0.0722,
            "CFT beats the mixture (english -> similar), mean of EA and MA": 0.0948,
            "Phase # on a similar set keeps English ability, within the margin of #.# "
            "(english -> similar)": 0.2118,
            "CFT beats the mixture (english -> dissimilar), mean of EA and MA": 0.0326,
            "Phase # on a dissimilar set loses English ability (english -> dissimilar)": 0.0906,
            "GR_# keeps English ability better than plain CFT": 0.2132,
            "ER_# keeps English ability better than plain CFT": 0.0062,
            "LF_H# keeps English ability better than plain CFT": 0.002,
            "Spectrum keeps English ability better than plain CFT": 0.0128,
            "LoRA keeps English ability better than plain CFT": 0.1442,
            "LoRA gains less multilingual ability than full CFT": 0.025,
        },
    ),
}


def measured_band(cfg: ExperimentConfig) -> SeedBand | None:
    """The measured seed-noise band that judges ``cfg``'s one-seed claims: the band measured
    on a config of its name (:data:`CONFIG_SEED_NOISE_BANDS`), else its protocol's."""
    return CONFIG_SEED_NOISE_BANDS.get((cfg.experiment, cfg.name)) or SEED_NOISE_BANDS.get(
        cfg.experiment
    )


def claim_key(statement: str) -> str:
    """A claim's statement with every number replaced by ``#`` (the key of its band)."""
    return re.sub(r"\d+", "#", statement)


def seed_list(cfg: ExperimentConfig) -> list[int]:
    """The training seeds of a run: ``seeds`` when given, else ``[seed]``."""
    return list(cfg.seeds) if cfg.seeds else [cfg.seed]


def seed_stage_name(name: str, seed: int) -> str:
    """The name of a later seed's copy of stage ``name``."""
    return f"{name}{SEED_TAG}{seed}"


def _fingerprints(specs: Sequence[StageSpec], known: dict[str, str]) -> list[str]:
    """Each spec's cache fingerprint (upstreams looked up in ``known``, which this fills)."""
    out = []
    for spec in specs:
        missing = [up for up in spec.inputs.values() if up not in known]
        if missing:
            raise ConfigError(
                f"stage '{spec.name}' reads {missing} before they are built; "
                "a protocol lists a stage after the stages it reads"
            )
        fp = spec.fingerprint({up: known[up] for up in spec.inputs.values()})
        known[spec.name] = fp
        out.append(fp)
    return out


def fan_out(cfg: C, build_one: Callable[[C], list[StageSpec]]) -> list[StageSpec]:
    """The stages of ``build_one`` for every seed of ``cfg`` (see the module docstring).

    With one seed (the default) this is ``build_one(cfg)`` with ``seed`` set to that seed.
    """
    seeds = seed_list(cfg)
    first = build_one(cfg.model_copy(update={"seed": seeds[0]}))
    if len(seeds) == 1:
        return first
    shared = {fp: spec.name for spec, fp in zip(first, _fingerprints(first, {}), strict=True)}
    out = list(first)
    for seed in seeds[1:]:
        specs = build_one(cfg.model_copy(update={"seed": seed}))
        known: dict[str, str] = {}
        renamed: dict[str, str] = {}
        for spec, fp in zip(specs, _fingerprints(specs, known), strict=True):
            if fp in shared:
                renamed[spec.name] = shared[fp]
                continue
            name = seed_stage_name(spec.name, seed)
            renamed[spec.name] = name
            inputs = {role: renamed[up] for role, up in spec.inputs.items()}
            out.append(replace(spec, name=name, inputs=inputs))
    return out


class SeededExperiment(Experiment):
    """A protocol whose pipeline is the stages of one training seed, run once per seed of
    ``seeds`` by :func:`fan_out`: a subclass writes :meth:`build_one` (and ``report``)."""

    @classmethod
    def build(cls, cfg: ExperimentConfig) -> list[StageSpec]:
        if not isinstance(cfg, cls.Config):
            raise TypeError(
                f"{cls.__name__} builds a {cls.Config.__name__}, not {type(cfg).__name__}"
            )
        return fan_out(cfg, cls.build_one)

    @classmethod
    @abstractmethod
    def build_one(cls, cfg: Any) -> list[StageSpec]:
        """The stages of one training seed (``cfg.seed``), a ``cls.Config``."""


def stage_seeds(stage_names: Sequence[str], seeds: Sequence[int]) -> dict[str, list[int]]:
    """Which seeds each stage of a fanned-out run belongs to: ``NAME.seedS`` to seed S; a
    first-seed stage ``NAME`` to the first seed and to every later seed that has no
    ``NAME.seedS`` of its own (a stage the seed does not reach is shared)."""
    if not seeds:
        raise ConfigError("need at least one seed")
    names = set(stage_names)
    tags = {seed_stage_name("", s): s for s in seeds[1:]}
    out: dict[str, list[int]] = {}
    for name in stage_names:
        own = next((s for tag, s in tags.items() if name.endswith(tag)), None)
        if own is not None and name[: -len(seed_stage_name("", own))] in names:
            out[name] = [own]
        else:
            out[name] = [seeds[0], *(s for s in seeds[1:] if seed_stage_name(name, s) not in names)]
    return out


def _run_stages(run_dir: Path) -> list[str]:
    try:
        record = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
        return list(record["stages"])
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        raise DataError(f"{run_dir}/run.json is missing or damaged; run the experiment") from None


def seeded_scores(run_dir: Path, seeds: Sequence[int]) -> list[Score]:
    """The run's score records (``results/scores.jsonl``), each tagged with the training seed
    of the stage that wrote it (once per seed for a stage shared by all seeds); a record that
    already names its seed keeps it. One seed: the records as they are."""
    scores = read_scores(run_dir / "results" / "scores.jsonl")
    return scores if len(seeds) < 2 else _tag_seeds(scores, run_dir, seeds, "score records")


def seeded_items(run_dir: Path, seeds: Sequence[int]) -> list[ItemSet]:
    """The run's item sets (:func:`polymnesia.items.run_items`), each tagged with the seed of
    the stage that wrote it as :func:`seeded_scores` tags records (one seed: as they are)."""
    sets = run_items(run_dir)
    return sets if len(seeds) < 2 else _tag_seeds(sets, run_dir, seeds, "item sets")


def seeded_run(run: RunTable, seeds: Sequence[int]) -> RunTable:
    """The run's table (:func:`polymnesia.reports.frame.load_run`) with its score records and
    item sets tagged as :func:`seeded_scores` and :func:`seeded_items` tag them (one seed: the
    table as it is)."""
    if len(seeds) < 2:
        return run
    scores = _tag_seeds(run.scores(), run.run_dir, seeds, "score records")
    return run.with_records(scores, _tag_seeds(run.items(), run.run_dir, seeds, "item sets"))


_Seeded = TypeVar("_Seeded", Score, ItemSet)


def _tag_seeds(
    records: Sequence[_Seeded], run_dir: Path, seeds: Sequence[int], what: str
) -> list[_Seeded]:
    owners = stage_seeds(_run_stages(run_dir), seeds)
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
            out += [replace(rec, seed=s) for s in owners[rec.stage]]
    return out


def seed_band(cfg: ExperimentConfig) -> float | None:
    """The seed-noise band of ``cfg``'s claims: the config's ``seed_noise_band``, else the
    largest of its measured band (:func:`measured_band`; claims measured alone get their
    own), else None."""
    if cfg.seed_noise_band is not None:
        return cfg.seed_noise_band
    measured = measured_band(cfg)
    return measured.band if measured else None


def with_seed_band(claims: Sequence[Claim], cfg: ExperimentConfig) -> list[Claim]:
    """The claims carrying the seed-noise band when the run has one seed (with several, the
    intervals cover the seeds themselves and no band applies)."""
    if len(seed_list(cfg)) > 1:
        return list(claims)
    if cfg.seed_noise_band is not None:
        return [replace(c, seed_band=cfg.seed_noise_band) for c in claims]
    measured = measured_band(cfg)
    if measured is None:
        return list(claims)
    return [replace(c, seed_band=measured.of(c.statement)) for c in claims]


def variance_note(cfg: ExperimentConfig) -> str:
    """One paragraph: which sources of variance the report's intervals cover."""
    seeds = seed_list(cfg)
    if len(seeds) > 1:
        return (
            f"Intervals and paired tests cover training seeds and test items: {len(seeds)} "
            f"training seeds ({', '.join(map(str, seeds))}) and their shared test items, as "
            "mean ± t × SE with SE² the variance of an item bootstrap of the mean over seeds "
            "plus s²/k over the seeds, and t at Welch-Satterthwaite degrees of freedom (so with "
            "few seeds as wide as a t-interval over them); a table cell over seeds without "
            "items shows the Student-t interval over seeds."
        )
    text = (
        f"Intervals cover test items only: this run has one training seed ({seeds[0]}), so "
        "they leave out how much a result moves with the seed."
    )
    measured = measured_band(cfg)
    if cfg.seed_noise_band is not None:
        band = f"±{_fmt(cfg.seed_noise_band)} for every claim (the config's seed_noise_band)"
    elif measured is not None:
        band = (
            f"each measured claim's own, up to ±{_fmt(measured.band)} (twice the standard "
            f"deviation of its effect over {measured.n_seeds} seeds of {measured.config} at "
            f"commit {measured.commit[:7]}, {measured.date}; a claim not measured has none)"
        )
    else:
        return text + " No seed-noise band is measured for this protocol."
    return text + (
        f" Seed-noise band: {band}; a claim contradicted by an effect within its band of the "
        "boundary is reported as within seed noise."
    )


def _fmt(x: float) -> str:
    return f"{x:.3g}" if math.isfinite(x) else "–"

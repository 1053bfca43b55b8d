"""Training seeds: one pipeline per seed, stages shared where the seed does not reach them.

A protocol's config takes ``seeds: [..]`` (:class:`~polymnesia.experiments.base.ExperimentConfig`).
:func:`fan_out` builds the protocol once per seed (the config with ``seed`` set to it). The
first seed's stages keep their names and specs, so a one-seed run has exactly the stages and
fingerprints it had before seeds existed. Every later seed's stage whose fingerprint equals a
first-seed stage's (data preparation: it takes no seed) is that stage, shared; any other is
added as ``NAME.seedS``. The cache then computes each distinct stage once. Each spec carries
the seeds it serves as data (:attr:`~polymnesia.pipeline.stage.StageSpec.seeds`, with its
name in its seed's own pipeline, ``unseeded``; neither is fingerprinted), and the runner
writes them into each stage's record in ``run.json``.

Which seeds a run's stages and records belong to is read back from ``run.json``, never from a
stage's name: :mod:`polymnesia.experiments.seed_records`.

With several seeds, intervals and paired tests cover seeds and test items together (item
bootstrap variance plus the variance over seeds, Student t; :mod:`polymnesia.metrics.uncertainty`,
chosen in :mod:`polymnesia.reports.evidence`). With one seed they cover the test items only, and
each claim is judged on its item interval widened by the seed noise of the config's own content
(:func:`with_seed_band`): a :class:`BandRecord` (``seed_bands/*.json``, keyed by experiment and
:func:`config_fingerprint`, written by ``scripts/measured_run.py --band`` from runs of the
config's seeds) holds each claim's effect per seed, and the standard deviation comes from the
seeds other than the one judged. A config without its own band gets none: its claims read "one
seed, seed noise not measured".
"""

from __future__ import annotations

import hashlib
import json
import statistics
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from polymnesia.errors import ConfigError, DataError, PolymnesiaError
from polymnesia.experiments.base import EXPERIMENTS, Experiment, ExperimentConfig
from polymnesia.pipeline.stage import StageSpec
from polymnesia.reports.claims import Claim
from polymnesia.reports.measured import SET_ASIDE
from polymnesia.reports.verdicts import MEASURE_HINT, UNMEASURED, SeedNoise

C = TypeVar("C", bound=ExperimentConfig)

#: the name of a later seed's own copy of stage NAME is NAME + SEED_TAG + seed
SEED_TAG = ".seed"


#: the measured seed-noise bands: one JSON record per experiment and config content
#: (:func:`config_fingerprint`), shipped as package data so an installed polymnesia reads them
BANDS_DIR = Path(__file__).resolve().parent / "seed_bands"
#: the band record format (bump when fields change meaning)
BAND_VERSION = 1


@dataclass(frozen=True)
class BandRecord:
    """Per-seed effects of each claim of one config, measured on its own training seeds.

    ``effects`` maps a claim id to ``{seed: effect}`` over the seeds where the claim was
    tested; :meth:`noise` gives the standard deviation that judges one seed's claim, from the
    *other* seeds (leave-one-out, so a seed is never judged by a band it helped measure).
    ``experiment`` and ``fingerprint`` (:func:`config_fingerprint`: the config's content but
    its seeds and name) say which runs it judges; ``config``, ``commit``, ``date`` and
    ``source`` (the measured-run record it was taken from) say where it comes from.
    """

    experiment: str
    fingerprint: str
    config: str
    commit: str
    date: str
    source: str
    effects: Mapping[str, Mapping[int, float]]
    statements: Mapping[str, str] = field(default_factory=dict)

    @property
    def seeds(self) -> list[int]:
        return sorted({s for per in self.effects.values() for s in per})

    def noise(self, claim_id: str, seed: int) -> SeedNoise | None:
        """The seed noise of claim ``claim_id`` for a run of training seed ``seed``: the
        sample standard deviation of its effect over the band's seeds other than ``seed``
        (None when fewer than two remain or the claim was not measured)."""
        per = self.effects.get(claim_id, {})
        others = sorted(s for s in per if s != seed)
        if len(others) < 2:
            return None
        sd = statistics.stdev([per[s] for s in others])
        return SeedNoise(sd, tuple(others), f"{self.config} at {self.commit[:7]}")

    def to_json(self) -> dict[str, Any]:
        return {
            "version": BAND_VERSION,
            "experiment": self.experiment,
            "fingerprint": self.fingerprint,
            "config": self.config,
            "commit": self.commit,
            "date": self.date,
            "source": self.source,
            "claims": {
                cid: {
                    "statement": self.statements.get(cid, ""),
                    "effects": {str(s): e for s, e in sorted(per.items())},
                }
                for cid, per in sorted(self.effects.items())
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "") -> BandRecord:
        try:
            if data.get("version") != BAND_VERSION:
                raise DataError(
                    f"{where}: band record version {data.get('version')}, expected {BAND_VERSION}"
                )
            claims = data["claims"]
            return cls(
                experiment=str(data["experiment"]),
                fingerprint=str(data["fingerprint"]),
                config=str(data["config"]),
                commit=str(data["commit"]),
                date=str(data["date"]),
                source=str(data.get("source", "")),
                effects={
                    cid: {int(s): float(e) for s, e in c["effects"].items()}
                    for cid, c in claims.items()
                },
                statements={cid: str(c.get("statement", "")) for cid, c in claims.items()},
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise DataError(
                f"{where}: not a seed-noise band record ({e!r}); expected experiment, "
                "fingerprint, config, commit, date and claims {id: {effects: {seed: effect}}}"
            ) from None


def band_path(experiment: str, fingerprint: str, directory: Path | None = None) -> Path:
    """Where the band record of ``experiment`` at config content ``fingerprint`` lives."""
    return (directory or BANDS_DIR) / f"{experiment}-{fingerprint[:16]}.json"


def read_bands(directory: Path | None = None) -> list[BandRecord]:
    """Every band record of ``directory`` (default: the shipped ones)."""
    where = directory or BANDS_DIR
    out = []
    for path in sorted(where.glob("*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise DataError(f"{path}: not a seed-noise band record ({e})") from None
        out.append(BandRecord.from_json(data, str(path)))
    return out


def write_band(record: BandRecord, directory: Path | None = None) -> Path:
    """Write ``record`` where :func:`band_of` finds it; returns its path."""
    path = band_path(record.experiment, record.fingerprint, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(record.to_json(), indent=1, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


def config_fingerprint(cfg: ExperimentConfig) -> str:
    """The fingerprint of a config's content but its seeds and name: the sha256 of the sorted
    cache fingerprints (:meth:`~polymnesia.pipeline.stage.StageSpec.fingerprint`) of the
    stages its protocol builds for one training seed, seed 0 (the seed sits in those stages'
    parameters; nothing else of a seed does). Two configs with the same
    fingerprint train and evaluate the same models at the same size (a renamed copy has its
    original's; a change of size, steps or data does not), and what only changes how results
    are shown is left out, as it is of the stages."""
    # a protocol that trains its seeds inside one pipeline (lf_mlf) reads seeds: give it [0]
    one = cfg.model_copy(update={"seed": 0, "seeds": [0] if cfg.seeds else None, "name": "_"})
    specs = EXPERIMENTS.get(cfg.experiment).build(one)
    blob = json.dumps(sorted(_fingerprints(list(specs), {})))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def band_from_record(record: Mapping[str, Any], cfg: ExperimentConfig) -> BandRecord:
    """The seed-noise band record of a measured-run record
    (:func:`polymnesia.reports.measured.record_runs`) of ``cfg``'s one-seed runs: each
    claim's effect per seed, keyed by its id, over the seeds where it was tested (a
    precondition, a claim set aside or one without an id is left out; a claim tested in
    fewer than two seeds too). ``cfg`` is the config the runs ran (its fingerprint keys the
    band)."""
    effects: dict[str, dict[int, float]] = {}
    statements: dict[str, str] = {}
    for run in record["runs"]:
        seed = run["seed"]
        if not isinstance(seed, int):
            raise DataError(
                f"run of seeds {seed} trains them inside one pipeline: its claims are already "
                "judged over them and give no per-seed effects for a band"
            )
        for c in run["claims"]:
            if not c.get("id") or c.get("kind") == "precondition" or c["effect"] is None:
                continue
            if c["verdict"] in SET_ASIDE:  # its effect measures nothing
                continue
            effects.setdefault(c["id"], {})[seed] = c["effect"]
            statements[c["id"]] = c["claim"]
    effects = {k: v for k, v in effects.items() if len(v) >= 2}
    if not effects:
        raise DataError(
            f"{record['name']}: no claim with an id was tested in two or more seeds; record "
            "runs of seeds: [0, 1, 2] made since claims.csv has an id column"
        )
    return BandRecord(
        experiment=cfg.experiment,
        fingerprint=config_fingerprint(cfg),
        config=record["config"],
        commit=record["commit"],
        date=record["date"],
        source=f"docs/runs/{record['name']}.json",
        effects=effects,
        statements=statements,
    )


def band_of(cfg: ExperimentConfig, directory: Path | None = None) -> BandRecord | None:
    """The band record measured on seeds of ``cfg``'s own content (same experiment and
    :func:`config_fingerprint`), or None: a config without its own band gets none (a band of
    another size or another config never stands in)."""
    try:
        fingerprint = config_fingerprint(cfg)
    except PolymnesiaError:  # its stages cannot be built here (an online task offline, say)
        return None
    for record in read_bands(directory):
        if record.experiment == cfg.experiment and record.fingerprint == fingerprint:
            return record
    return None


def seed_list(cfg: ExperimentConfig) -> list[int]:
    """The training seeds of a run: ``seeds`` when given, else ``[seed]``."""
    return list(cfg.seeds) if cfg.seeds else [cfg.seed]


def seed_stage_name(name: str, seed: int) -> str:
    """The name :func:`fan_out` gives a later seed's copy of stage ``name`` (a name, never
    read back for its seed: the spec carries it)."""
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
    """The stages of ``build_one`` for every seed of ``cfg`` (see the module docstring), each
    carrying the seeds it serves (:attr:`StageSpec.seeds`: a stage shared by several seeds
    lists them all) and its name in its seed's own pipeline (:attr:`StageSpec.unseeded`).

    With one seed (the default) this is ``build_one(cfg)`` with ``seed`` set to that seed.
    """
    seeds = seed_list(cfg)
    first = build_one(cfg.model_copy(update={"seed": seeds[0]}))
    serves: dict[str, list[int]] = {spec.name: [seeds[0]] for spec in first}
    shared = {fp: spec.name for spec, fp in zip(first, _fingerprints(first, {}), strict=True)}
    out = list(first)
    for seed in seeds[1:]:
        specs = build_one(cfg.model_copy(update={"seed": seed}))
        known: dict[str, str] = {}
        renamed: dict[str, str] = {}
        for spec, fp in zip(specs, _fingerprints(specs, known), strict=True):
            if fp in shared:
                renamed[spec.name] = shared[fp]
                serves[shared[fp]].append(seed)
                continue
            name = seed_stage_name(spec.name, seed)
            renamed[spec.name] = name
            inputs = {role: renamed[up] for role, up in spec.inputs.items()}
            out.append(replace(spec, name=name, inputs=inputs, unseeded=spec.name))
            serves[name] = [seed]
    return [replace(spec, seeds=tuple(serves[spec.name])) for spec in out]


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


def with_seed_band(
    claims: Sequence[Claim], cfg: ExperimentConfig, band: BandRecord | None | bool = True
) -> list[Claim]:
    """The claims as a one-seed run judges them (with several seeds, the intervals cover the
    seeds themselves and they are returned as they are): each claim measured in the config's
    band record (:func:`band_of`, or ``band`` when given; ``False``: none) carries its seed
    noise from the seeds other than this run's (:meth:`BandRecord.noise`); any other reads
    "one seed, seed noise not measured". Preconditions are checks of this run's own arms and
    carry no band."""
    seeds = seed_list(cfg)
    if len(seeds) > 1:
        return list(claims)
    record = band_of(cfg) if band is True else (band or None)
    out = []
    for c in claims:
        if c.kind == "precondition":
            out.append(c)
            continue
        noise = record.noise(c.id, seeds[0]) if record is not None and c.id else None
        if noise is None:
            out.append(replace(c, noise=None, unmeasured=f"{UNMEASURED}; {MEASURE_HINT}"))
        else:
            out.append(replace(c, noise=noise, unmeasured=""))
    return out


def variance_note(
    cfg: ExperimentConfig, band: BandRecord | None | bool = True, *, claims: bool = True
) -> str:
    """One paragraph: which sources of variance the report's intervals cover, and (``claims``:
    for a report that judges claims) the seed noise its one-seed claims are judged with."""
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
    if not claims:
        return text
    record = band_of(cfg) if band is True else (band or None)
    if record is None:
        try:
            content = f"fingerprint {config_fingerprint(cfg)[:12]}"
        except PolymnesiaError as e:
            content = f"not fingerprinted here: {e}"
        return text + (
            " No seed noise is measured for this config's content (experiment "
            f"{cfg.experiment}, {content}), so its claims read "
            f"'{UNMEASURED}': {MEASURE_HINT}, then record the band (docs/reports.md, \"Seed "
            'noise").'
        )
    measured = ", ".join(str(s) for s in record.seeds)
    return text + (
        f" Seed noise: measured on seeds {measured} of {record.config} (this config's content) "
        f"at commit {record.commit[:7]}, {record.date}; each claim is judged on its item interval "
        "widened by the standard deviation of its effect over the measured seeds other than "
        f"seed {seeds[0]} (df: those seeds less one, shown beside each band), Student t; a claim "
        f"missing from the band reads '{UNMEASURED}'."
    )

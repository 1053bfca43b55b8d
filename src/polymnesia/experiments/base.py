"""What an experiment protocol is: a typed config, a pipeline builder and a report.

One package per protocol from the papers lives next to this file: its ``protocol`` module
registers the protocol in :data:`EXPERIMENTS`, its ``config`` module the config class in
:data:`EXPERIMENT_CONFIGS` (read without the protocol's stages); a YAML file picks it with
``experiment: NAME``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.pipeline.cluster import ClusterConfig
from polymnesia.pipeline.partial import banner_lines, read_missing
from polymnesia.pipeline.stage import StageSpec
from polymnesia.registry import ModuleRegistry, Registry


class ExperimentConfig(StrictModel):
    """Keys every experiment config has.

    ``max_seeds`` says how many training seeds (``seeds``) a protocol runs in one run: 0 (the
    default) when it does not read ``seeds``, 1 when its report reads one seed (``seeds:
    [S]`` picks it), None for any number.
    """

    max_seeds: ClassVar[int | None] = 0

    experiment: str = Field(description="the protocol (polymnesia ls experiments)")
    name: str = Field(description="a short name; the default run folder is runs/NAME-HASH")
    description: str = ""
    smoke: bool = Field(
        False,
        description="a pipeline test at toy size: its report opens with a banner saying that "
        "its verdicts test the code, not the paper",
    )
    seed: int = Field(0, description="seed for model initialisation, data order and sampling")
    seeds: list[int] | None = Field(
        None,
        description="training seeds, each a full run of the protocol (stages the seed does not "
        "reach are shared); replaces seed; intervals then cover seeds and test items",
    )
    cluster: ClusterConfig = Field(
        default_factory=ClusterConfig,
        exclude=True,  # where the stages run: not in the config's hash, dumps or fingerprints
        description="SLURM settings of --executor slurm (partition, account, qos, time_min, "
        "...; docs/scale.md); left out of the config's hash and of every fingerprint",
    )
    seed_noise_band: float | None = Field(
        None,
        description="no longer read: a one-seed run is judged by the seed noise measured on "
        "seeds of the same config (docs/reports.md, 'Seed noise'); setting it is an error",
    )

    @field_validator("seed_noise_band")
    @classmethod
    def _no_hand_band(cls, v: float | None) -> float | None:
        if v is not None:
            raise ValueError(
                "seed_noise_band is no longer read: a one-seed run is judged by the seed noise "
                "measured on seeds of the same config; remove it, and measure the band with "
                "seeds: [0, 1, 2] (docs/reports.md, 'Seed noise')"
            )
        return v

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, v: list[int] | None) -> list[int] | None:
        if v is not None and not v:
            raise ValueError("seeds must not be empty (leave it out for one seed)")
        for i, seed in enumerate(v or []):
            if seed in (v or [])[:i]:
                raise ValueError(f"seed {seed!r} is listed twice in seeds")
        return v

    @model_validator(mode="after")
    def _seeds_this_protocol_runs(self) -> ExperimentConfig:
        most = type(self).max_seeds
        if self.seeds is not None and most is not None and len(self.seeds) > most:
            raise ValueError(
                f"seeds {self.seeds}: the {self.experiment} protocol does not read seeds; set seed"
                if most == 0
                else f"seeds {self.seeds}: the {self.experiment} report reads one training seed; "
                "run each seed as its own run (seed=S; the cache shares the stages the seed "
                f"does not reach), see docs/{self.experiment}.md, 'Seed noise'"
            )
        return self


class Experiment(ABC):
    """A protocol: ``Config`` validates the YAML, ``build`` returns the stages, ``report`` writes
    the report.
    """

    Config: ClassVar[type[ExperimentConfig]]

    @classmethod
    @abstractmethod
    def build(cls, cfg: ExperimentConfig) -> list[StageSpec]: ...

    @classmethod
    @abstractmethod
    def report(cls, cfg: ExperimentConfig, run_dir: Path) -> Path:
        """(Re)build tables, plots and the report from ``run_dir/results/scores.jsonl``."""


EXPERIMENTS: Registry[type[Experiment]] = Registry(
    "experiment", "experiments", "polymnesia.experiments.protocols"
)
#: each protocol's ``Config``, by the same names: what reading a config needs (the config
#: modules import no stage, so no torch or transformers), registered by its config module
EXPERIMENT_CONFIGS: Registry[type[ExperimentConfig]] = ModuleRegistry(
    "experiment",
    "experiment-configs",
    "polymnesia.experiments",
    "polymnesia.experiments.{name}.config",
)


#: the banner of a smoke config's report
SMOKE_BANNER = (
    "Smoke test: a toy-size run that checks the pipeline end to end. Its numbers and verdicts "
    "test the code, not the paper's findings."
)


def banner_of(cfg: ExperimentConfig, run_dir: Path | None = None) -> str:
    """The lines a report of ``cfg`` opens with, one per line ("" for a whole run of a study
    config): the smoke banner, then, for a run that lost stages for good (``run_dir``'s
    ``run.json`` says which, :mod:`polymnesia.pipeline.partial`), what is missing and why."""
    lines = [SMOKE_BANNER] if cfg.smoke else []
    record = read_missing(run_dir) if run_dir is not None else None
    return "\n".join(lines + (banner_lines(record) if record else []))

"""The ``cluster:`` section of a config: where ``--executor slurm`` runs the stages. Apart from
the executor (:mod:`polymnesia.pipeline.slurm`) so that reading a config imports neither
submitit nor torch."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from polymnesia.config.base import StrictModel

#: sbatch options polymnesia or submitit set themselves: refused in ``cluster.sbatch``
OWN_OPTIONS = frozenset(
    {"output", "error", "job-name", "wrap", "array", "parsable", "signal", "open-mode"}
)
_OPTION = re.compile(r"^[a-z][a-z0-9-]*$")


class ClusterConfig(StrictModel):
    """Where ``--executor slurm`` runs the stages (``cluster:`` in a config; docs/scale.md).
    None of it enters the config's hash or a stage's fingerprint."""

    partition: str | None = Field(
        None, description="SLURM partition (sbatch --partition); default: the cluster's"
    )
    account: str | None = Field(None, description="account charged (sbatch --account)")
    qos: str | None = Field(None, description="quality of service (sbatch --qos)")
    time_min: int = Field(
        60, ge=1, le=525600, description="time limit of each job in minutes (sbatch --time)"
    )
    constraint: str | None = Field(None, description="node features (sbatch --constraint)")
    cpus_per_job: int = Field(
        1, ge=1, le=4096, description="CPUs of each job (sbatch --cpus-per-task)"
    )
    mem_gb: float | None = Field(
        None,
        gt=0,
        le=1e6,
        description="memory of each job in GB (sbatch --mem); default: the cluster's",
    )
    gpus_per_job: int = Field(
        0,
        ge=0,
        le=64,
        description="GPUs of each job (sbatch --gpus-per-node); 0 with gpu_memory_gb: sized "
        "per stage by the memory planner",
    )
    gpu_memory_gb: float | None = Field(
        None,
        gt=0,
        le=1e4,
        description="memory of one GPU of the partition in GB: each training stage's job then "
        "gets the fewest GPUs its memory plan fits on (1, 2, 4, ... up to gpus_per_node x "
        "max_nodes; FSDP2 on more than one, under torchrun), every other stage one GPU, a data "
        "stage none",
    )
    gpus_per_node: int = Field(
        8, ge=1, le=64, description="GPUs of one node (with gpu_memory_gb): the most per node"
    )
    max_nodes: int = Field(
        1, ge=1, le=1024, description="nodes one job may span (with gpu_memory_gb)"
    )
    sbatch: dict[str, str | int] = Field(
        default_factory=dict,
        description="more sbatch options, name without dashes -> value "
        "(e.g. {mail-type: END, exclusive: ''}); an empty value is a flag",
    )
    setup: list[str] = Field(
        default_factory=list,
        description="shell lines each job runs first (module load ..., source .venv/bin/activate)",
    )
    batch: int = Field(
        8,
        ge=1,
        le=1000,
        description="at most this many ready evaluation and analysis stages share one job",
    )
    attempts: int = Field(
        1,
        ge=1,
        le=100,
        description="times a job is submitted before its stage counts as failed (a failed, "
        "cancelled, preempted or timed-out job is submitted again and resumes)",
    )
    poll_s: float = Field(
        5.0, ge=0.1, le=600, description="seconds between two looks at the queue (squeue)"
    )

    @field_validator("sbatch")
    @classmethod
    def _options(cls, v: dict[str, str | int]) -> dict[str, str | int]:
        for key in v:
            if not _OPTION.match(key):
                raise ValueError(
                    f"sbatch option {key!r}: give its long name without dashes "
                    "(mail-type, exclusive, ...)"
                )
            if key.replace("_", "-") in OWN_OPTIONS:
                raise ValueError(
                    f"sbatch option {key!r} is set by polymnesia itself; "
                    f"not accepted: {', '.join(sorted(OWN_OPTIONS))}"
                )
        return v

    @model_validator(mode="after")
    def _one_sizing(self) -> ClusterConfig:
        if self.gpu_memory_gb is not None and self.gpus_per_job:
            raise ValueError(
                "give either cluster.gpus_per_job (every job the same GPUs) or "
                "cluster.gpu_memory_gb (each stage sized by the memory planner), not both"
            )
        return self

"""Per-document English and multilingual ability of every model a ``two_phase`` run
evaluated, per training seed, read once from the harness stages' items: the cells,
differences and chance checks every table and claim of the report is built from."""

from __future__ import annotations

from polymnesia.experiments.seed_records import run_stage_seeds
from polymnesia.experiments.seeds import seed_list
from polymnesia.experiments.two_phase.abilities import (
    Ability,
    ability,
    combined,
    pooled_difference,
    pooled_interval,
    pooled_score,
)
from polymnesia.experiments.two_phase.config import TwoPhaseConfig
from polymnesia.experiments.two_phase.roles import eval_stage
from polymnesia.items import ItemSet
from polymnesia.metrics.uncertainty import PairedTest
from polymnesia.reports.frame import RunTable
from polymnesia.reports.table_core import Estimate


class Evidence:
    """Per-document EA and MA of every evaluated model of a run, per training seed, from the
    harness stages' items in the run folder (read once; ``run`` tagged with its seeds by
    :func:`~polymnesia.experiments.seed_records.seeded_run`). Cells and differences pool the seeds
    (one seed: that seed's items, as before seeds existed)."""

    def __init__(self, cfg: TwoPhaseConfig, run: RunTable) -> None:
        self.cfg = cfg
        self.seeds = seed_list(cfg)
        several = len(self.seeds) > 1
        # a later seed's stage under its own pipeline's name (run.json's stage seeds)
        owners = run_stage_seeds(run.record, self.seeds) if several else {}
        self.sets: dict[tuple[str, int], list[ItemSet]] = {}
        for s in run.items():
            if s.kind == "docs" and s.stage is not None:
                seed = s.seed if several and s.seed is not None else self.seeds[0]
                stage = owners[s.stage].unseeded if s.stage in owners else s.stage
                self.sets.setdefault((stage, seed), []).append(s)
        self._cache: dict[tuple[str, int], tuple[Ability, Ability]] = {}
        self._chance: dict[str, tuple[bool | None, float | None]] = {}

    def has(self, stage: str) -> bool:
        """Whether every training seed of the run scored ``stage``'s model."""
        return all((eval_stage(stage), seed) in self.sets for seed in self.seeds)

    def abilities(self, stage: str, seed: int | None = None) -> tuple[Ability, Ability]:
        """EA and MA of ``stage``'s model trained with ``seed`` (default: the first seed)."""
        key = (stage, self.seeds[0] if seed is None else seed)
        if key not in self._cache:
            sets, e = self.sets.get((eval_stage(stage), key[1]), []), self.cfg.evaluate.harness
            self._cache[key] = (
                ability(sets, e.english, stage),
                ability(sets, e.multilingual, stage),
            )
        return self._cache[key]

    def per_seed(self, stage: str, which: str) -> list[Ability]:
        """``which`` (EA, MA or combined) of ``stage``'s model, one per training seed."""
        out = []
        for seed in self.seeds:
            ea, ma = self.abilities(stage, seed)
            out.append(combined(ea, ma) if which == "combined" else ea if which == "EA" else ma)
        return out

    def score(self, stage: str, which: str) -> float:
        """``which`` of ``stage``'s model, the mean over training seeds."""
        return pooled_score(self.per_seed(stage, which))

    def cell(self, stage: str, which: str) -> Estimate:
        return Estimate.of(pooled_interval(self.per_seed(stage, which), seed=self.cfg.seed))

    def difference(self, a: str, b: str, which: str) -> PairedTest:
        return pooled_difference(
            self.per_seed(a, which), self.per_seed(b, which), seed=self.cfg.seed
        )

    def ma_chance(self, stage: str) -> tuple[bool | None, float | None]:
        """Whether ``stage``'s MA lies above uniform guessing (its interval over seeds and
        documents above the chance score, :meth:`Ability.chance`), and that score; ``(None,
        None)`` where chance is unknown (a generative MA task)."""
        if stage not in self._chance:  # several claims ask of one model: one bootstrap
            per = self.per_seed(stage, "MA")
            chance = per[0].chance()
            above = None if chance is None else pooled_interval(per, seed=self.cfg.seed).low
            self._chance[stage] = (
                (None, None) if chance is None or above is None else (above > chance, chance)
            )
        return self._chance[stage]

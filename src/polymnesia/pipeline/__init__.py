"""Pipelines of stages: fingerprints, the stage cache, run folders and the runner."""

from polymnesia.pipeline.stage import STAGES, Stage, StageContext, StageSpec

__all__ = ["STAGES", "Stage", "StageContext", "StageSpec"]

"""Experiment protocols, one module each, registered by name."""

from polymnesia.experiments import language_modeling  # noqa: E402,F401  (registers)
from polymnesia.experiments.base import EXPERIMENTS, Experiment, ExperimentConfig

__all__ = ["EXPERIMENTS", "Experiment", "ExperimentConfig"]

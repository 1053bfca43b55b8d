"""Experiment protocols, one module each, registered by name."""

from polymnesia.experiments.base import EXPERIMENTS, Experiment, ExperimentConfig

from polymnesia.experiments import language_modeling  # noqa: E402,F401  (registers)

__all__ = ["EXPERIMENTS", "Experiment", "ExperimentConfig"]

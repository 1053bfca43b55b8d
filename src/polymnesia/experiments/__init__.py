"""Experiment protocols, one module each, registered by name when this package is imported."""

from polymnesia.experiments.base import EXPERIMENTS, Experiment, ExperimentConfig
from polymnesia.registry_imports import import_submodules

import_submodules(__name__)

__all__ = ["EXPERIMENTS", "Experiment", "ExperimentConfig"]

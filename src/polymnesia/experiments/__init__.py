"""Experiment protocols, one package each (``config``, ``protocol``, ``report``), registered by
name when this package is imported; ``shared`` builds the stages every protocol shares.

>>> from polymnesia.experiments import load_config, EXPERIMENTS
>>> cfg = load_config("configs/quickstart.yaml", ["train.steps=10"])     # doctest: +SKIP
>>> specs = EXPERIMENTS.get(cfg.experiment).build(cfg)                   # doctest: +SKIP
"""

from polymnesia.experiments.base import EXPERIMENTS, Experiment, ExperimentConfig
from polymnesia.experiments.loading import load_config, load_run_config, resolve_config
from polymnesia.registry_imports import import_submodules

import_submodules(__name__)

__all__ = [
    "EXPERIMENTS",
    "Experiment",
    "ExperimentConfig",
    "load_config",
    "load_run_config",
    "resolve_config",
]

"""Experiment protocols, one package each (``config``, ``protocol``, ``report``), registered by
name on the first lookup (:data:`EXPERIMENTS` imports every ``protocol`` module,
:data:`EXPERIMENT_CONFIGS` every ``config`` module only: reading a config loads no torch);
``shared`` builds the stages every protocol shares.

>>> from polymnesia.experiments import load_config, EXPERIMENTS
>>> cfg = load_config("configs/quickstart.yaml", ["train.steps=10"])     # doctest: +SKIP
>>> specs = EXPERIMENTS.get(cfg.experiment).build(cfg)                   # doctest: +SKIP
"""

from polymnesia.experiments.base import (
    EXPERIMENT_CONFIGS,
    EXPERIMENTS,
    Experiment,
    ExperimentConfig,
)
from polymnesia.experiments.loading import load_config, load_run_config, resolve_config

__all__ = [
    "EXPERIMENTS",
    "EXPERIMENT_CONFIGS",
    "Experiment",
    "ExperimentConfig",
    "load_config",
    "load_run_config",
    "resolve_config",
]

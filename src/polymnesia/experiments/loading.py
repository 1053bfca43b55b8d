"""From a YAML file (or a run folder) to the typed config of the protocol it names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from polymnesia.config.loader import apply_overrides, load_yaml, validate
from polymnesia.errors import ConfigError, PolymnesiaError, unknown
from polymnesia.experiments.base import EXPERIMENTS


def resolve_config(data: dict[str, Any], source: str = "") -> Any:
    """Validate a raw mapping into the typed config of the experiment it names."""
    name = data.get("experiment")
    if name is None:
        raise ConfigError(
            f"{source + ': ' if source else ''}missing required key 'experiment'; accepted: {', '.join(EXPERIMENTS.names())}"
        )
    if not isinstance(name, str) or name not in EXPERIMENTS:
        raise ConfigError(str(unknown("experiment", str(name), EXPERIMENTS.names())))
    return validate(EXPERIMENTS.get(name).Config, data, source)


def load_config(path: str | Path, overrides: list[str] | None = None) -> Any:
    """Load, override and validate a config file into its experiment's typed config."""
    data = apply_overrides(load_yaml(path), overrides or [])
    return resolve_config(data, str(path))


def load_run_config(run_dir: Path) -> Any:
    """Re-validate the resolved config saved in a run folder."""
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise PolymnesiaError(f"{run_dir} is not a polymnesia run folder (no config.yaml)")
    return resolve_config(yaml.safe_load(path.read_text(encoding="utf-8")), str(path))

"""From a YAML file (or a run folder) to the typed config of the protocol it names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from polymnesia.config.checks import check_safe_name
from polymnesia.config.loader import apply_overrides, check_finite, load_yaml, validate
from polymnesia.data.config import DataConfig
from polymnesia.data.sources.checks import check_data_section
from polymnesia.errors import ConfigError, PolymnesiaError, unknown
from polymnesia.experiments.base import EXPERIMENT_CONFIGS


def resolve_config(data: dict[str, Any], source: str = "") -> Any:
    """Validate a raw mapping into the typed config of the experiment it names."""
    check_finite(data, source)
    if "grid" in data:  # read by `polymnesia sweep` (polymnesia.experiments.sweep) only
        raise ConfigError(
            f"{source + ': ' if source else ''}the config has a 'grid:' section, which "
            "`polymnesia sweep` expands into runs; `polymnesia run` runs one config: run it "
            "with `polymnesia sweep`, or remove the section"
        )
    name = data.get("experiment")
    if name is None:
        raise ConfigError(
            f"{source + ': ' if source else ''}missing required key 'experiment'; accepted: "
            f"{', '.join(EXPERIMENT_CONFIGS.names())}"
        )
    if not isinstance(name, str) or name not in EXPERIMENT_CONFIGS:
        raise ConfigError(str(unknown("experiment", str(name), EXPERIMENT_CONFIGS.names())))
    cfg = validate(EXPERIMENT_CONFIGS.get(name), data, source)
    check_sections(cfg, source)
    return cfg


def _data_sections(model: BaseModel, path: str = "") -> list[tuple[str, DataConfig]]:
    found: list[tuple[str, DataConfig]] = []
    for name in type(model).model_fields:
        value = getattr(model, name, None)
        sub = f"{path}.{name}" if path else name
        if isinstance(value, DataConfig):
            found.append((sub, value))
        elif isinstance(value, BaseModel):
            found.extend(_data_sections(value, sub))
    return found


def check_sections(cfg: BaseModel, source: str = "") -> None:
    """What a validated config is checked for beyond its types (one ConfigError line): a safe
    run name, and every data section against its source (options the source accepts, a local
    path that exists, split fractions that leave no split empty)."""
    where = f"{source}: " if source else ""
    try:
        check_safe_name(getattr(cfg, "name", "run"), "name")
        for path, section in _data_sections(cfg):
            check_data_section(section, path)
    except ConfigError as e:
        raise ConfigError(f"{where}{e}") from None


def load_config(path: str | Path, overrides: list[str] | None = None) -> Any:
    """Load, override and validate a config file into its experiment's typed config."""
    data = apply_overrides(load_yaml(path), overrides or [])
    return resolve_config(data, str(path))


def load_run_config(run_dir: Path) -> Any:
    """Re-validate the resolved config saved in a run folder (one line if it is damaged)."""
    if not run_dir.is_dir():
        raise PolymnesiaError(f"run folder {run_dir} does not exist or is not a folder")
    path = run_dir / "config.yaml"
    if not path.is_file():
        raise PolymnesiaError(f"{run_dir} is not a polymnesia run folder (no config.yaml)")
    return resolve_config(load_yaml(path), str(path))

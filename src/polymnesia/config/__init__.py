"""Typed experiment configs: YAML in, validated pydantic objects out."""

from polymnesia.config.base import StrictModel
from polymnesia.config.loader import apply_overrides, load_config, load_yaml, resolve_config

__all__ = ["StrictModel", "apply_overrides", "load_config", "load_yaml", "resolve_config"]

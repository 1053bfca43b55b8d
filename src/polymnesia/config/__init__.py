"""Typed configs: YAML in, validated pydantic objects out (the protocols' configs are built from
these pieces in :mod:`polymnesia.experiments`, which also resolves a file to its protocol)."""

from polymnesia.config.base import NOT_FINGERPRINTED, StrictModel
from polymnesia.config.loader import apply_overrides, load_yaml, validate

__all__ = ["NOT_FINGERPRINTED", "StrictModel", "apply_overrides", "load_yaml", "validate"]

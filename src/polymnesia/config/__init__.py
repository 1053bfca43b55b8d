"""Typed configs: YAML in, validated pydantic objects out (the protocols' configs are built from
these pieces in :mod:`polymnesia.experiments`, which also resolves a file to its protocol)."""

from polymnesia.config.base import FINGERPRINTED_UNLESS_DEFAULT, NOT_FINGERPRINTED, StrictModel
from polymnesia.config.loader import apply_overrides, load_yaml, validate

__all__ = [
    "FINGERPRINTED_UNLESS_DEFAULT",
    "NOT_FINGERPRINTED",
    "StrictModel",
    "apply_overrides",
    "load_yaml",
    "validate",
]

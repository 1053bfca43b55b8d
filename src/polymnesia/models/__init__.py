"""Decoder models: Mistral scaled down from presets, or any Hub model id.

The package imports only what a config reads (:class:`ModelConfig`, the presets), so a
config is checked without torch; building, loading and saving models is
:mod:`polymnesia.models.build`'s."""

from polymnesia.models.config import ModelConfig
from polymnesia.models.presets import PRESETS, Preset

__all__ = ["PRESETS", "ModelConfig", "Preset"]

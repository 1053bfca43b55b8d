"""Decoder models: Mistral scaled down from presets, or any Hub model id."""

from polymnesia.models.build import (
    ModelConfig,
    build_model,
    count_parameters,
    load_model,
    save_model,
)
from polymnesia.models.presets import PRESETS, Preset

__all__ = [
    "PRESETS",
    "ModelConfig",
    "Preset",
    "build_model",
    "count_parameters",
    "load_model",
    "save_model",
]

"""polymnesia's training methods inside the Hugging Face Trainer (and TRL's ``SFTTrainer``,
its subclass): callbacks and a Trainer subclass that call the same pure functions as
polymnesia's own loop (docs/integrations.md)."""

from polymnesia.integrations.base import IntegrationWarning
from polymnesia.integrations.callbacks import (
    ActiveForgettingCallback,
    FrozenRowsCallback,
    LayerFreezingCallback,
)
from polymnesia.integrations.multilingual import MultilingualTrainer
from polymnesia.integrations.penalties import EWCCallback, L2SPCallback

__all__ = [
    "ActiveForgettingCallback",
    "EWCCallback",
    "FrozenRowsCallback",
    "IntegrationWarning",
    "L2SPCallback",
    "LayerFreezingCallback",
    "MultilingualTrainer",
]

"""Protocol ``active_forgetting`` (paper 000): ``config``, ``protocol`` (build) and ``report``."""

from polymnesia.experiments.active_forgetting.config import ARMS, ActiveForgettingConfig
from polymnesia.experiments.active_forgetting.protocol import ActiveForgetting

__all__ = ["ARMS", "ActiveForgetting", "ActiveForgettingConfig"]

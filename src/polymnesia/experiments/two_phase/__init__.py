"""Protocol ``two_phase`` (paper 002): ``config``, ``protocol`` (build), ``abilities`` (EA/MA
with intervals from the harness stages), ``roles`` (stage names) and ``report``."""

from polymnesia.experiments.two_phase.config import TwoPhaseConfig
from polymnesia.experiments.two_phase.protocol import TwoPhase

__all__ = ["TwoPhase", "TwoPhaseConfig"]

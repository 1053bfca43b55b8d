"""Protocol ``lifelong`` (paper 004): ``config``, ``protocol`` (build), ``results`` (R and its
metrics from what the stages wrote) and ``report``."""

from polymnesia.experiments.lifelong.config import LifelongBase, LifelongConfig
from polymnesia.experiments.lifelong.keys import arm_key
from polymnesia.experiments.lifelong.protocol import Lifelong

__all__ = ["Lifelong", "LifelongBase", "LifelongConfig", "arm_key"]

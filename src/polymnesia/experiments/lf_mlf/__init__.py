"""Protocol ``lf_mlf`` (paper 003): ``config``, ``protocol`` (build) and ``report``."""

from polymnesia.experiments.lf_mlf.config import LABELS, REFERENCE, LFMLFConfig, label_of
from polymnesia.experiments.lf_mlf.protocol import LFMLF

__all__ = ["LABELS", "LFMLF", "REFERENCE", "LFMLFConfig", "label_of"]

"""Protocol ``language_modeling`` (the quickstart): ``config``, ``protocol`` (build) and
``report``.
"""

from polymnesia.experiments.language_modeling.config import LanguageModelingConfig
from polymnesia.experiments.language_modeling.protocol import LanguageModeling

__all__ = ["LanguageModeling", "LanguageModelingConfig"]

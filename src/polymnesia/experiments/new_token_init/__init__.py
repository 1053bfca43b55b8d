"""Protocol ``new_token_init``: new-token initialisations x base models, relearning curves (issue
26).
"""

from polymnesia.experiments.new_token_init.protocol import NewTokenInit

__all__ = ["NewTokenInit"]

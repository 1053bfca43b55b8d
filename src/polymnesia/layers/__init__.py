"""Layer scoring and selection for layer freezing (the two-phase CFT paper, section 5.2; Spectrum).

* :mod:`~polymnesia.layers.stream` -- one-tensor-at-a-time reads of safetensors folders;
* :mod:`~polymnesia.layers.scores` -- Spectrum SNR, relative change, random scores;
* :mod:`~polymnesia.layers.select` -- top-pct per weight type, which side to freeze.
"""

from polymnesia.layers.scores import (
    most_changed_scan,
    random_scores,
    relative_change,
    spectrum_scan,
    spectrum_snr,
)
from polymnesia.layers.select import frozen_names, select, top_layers, top_per_type, weight_type

__all__ = [
    "frozen_names",
    "most_changed_scan",
    "random_scores",
    "relative_change",
    "select",
    "spectrum_scan",
    "spectrum_snr",
    "top_layers",
    "top_per_type",
    "weight_type",
]

"""Import every metric module so the registry is complete (``polymnesia ls metrics``)."""

from polymnesia.metrics import (  # noqa: F401
    classification,
    continual,
    drift,
    forgetting,
    isotropy,
    lm,
    similarity,
    stats,
    translation,
)

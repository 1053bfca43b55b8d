"""Import every metric module so the registry is complete (``polymnesia ls metrics``)."""

from polymnesia.metrics import classification, continual, isotropy, lm, stats, translation  # noqa: F401

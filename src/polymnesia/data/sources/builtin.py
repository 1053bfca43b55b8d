"""Import the built-in sources so that they register in ``SOURCES``."""

from polymnesia.data.sources import bible, hf, local, udhr

__all__ = ["bible", "hf", "local", "udhr"]

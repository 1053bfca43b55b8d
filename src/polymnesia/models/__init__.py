"""polymnesia.models."""

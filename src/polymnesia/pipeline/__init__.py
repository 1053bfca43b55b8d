"""polymnesia.pipeline."""

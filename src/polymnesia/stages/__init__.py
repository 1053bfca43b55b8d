"""polymnesia.stages."""

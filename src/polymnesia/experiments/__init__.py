"""polymnesia.experiments."""

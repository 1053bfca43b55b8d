"""polymnesia.training."""

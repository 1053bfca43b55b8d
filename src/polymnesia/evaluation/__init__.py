"""polymnesia.evaluation."""

"""polymnesia.gradients."""

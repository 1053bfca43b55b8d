"""polymnesia.reports."""

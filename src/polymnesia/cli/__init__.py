"""polymnesia.cli."""

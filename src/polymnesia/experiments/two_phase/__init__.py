"""Protocol ``two_phase`` (paper 002): ``config``, ``protocol`` (build), ``abilities`` (EA/MA
with intervals from the harness stages), ``roles`` (stage names) and ``report``."""

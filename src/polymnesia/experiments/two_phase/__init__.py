"""Protocol ``two_phase`` (the two-phase CFT paper): ``config``, ``protocol`` (build), ``abilities``
(EA/MA
with intervals from the harness stages), ``roles`` (stage names) and ``report``."""

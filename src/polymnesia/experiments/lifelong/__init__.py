"""Protocol ``lifelong`` (Khelli et al. 2025): ``config``, ``protocol`` (build), ``results`` (R and
its
metrics from what the stages wrote) and ``report``."""

"""Protocol ``lifelong`` (paper 004): ``config``, ``protocol`` (build), ``results`` (R and its
metrics from what the stages wrote) and ``report``."""

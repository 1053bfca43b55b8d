"""Protocol ``lf_mlf`` (paper 003): ``config``, ``protocol`` (build) and ``report``."""

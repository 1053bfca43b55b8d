"""Protocol ``lf_mlf`` (Mao et al. 2022): ``config``, ``protocol`` (build) and ``report``."""

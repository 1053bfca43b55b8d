"""Protocol ``active_forgetting`` (Aggarwal et al. 2024): ``config``, ``protocol`` (build) and
``report``."""

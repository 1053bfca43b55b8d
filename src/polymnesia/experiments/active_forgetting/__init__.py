"""Protocol ``active_forgetting`` (paper 000): ``config``, ``protocol`` (build) and ``report``."""

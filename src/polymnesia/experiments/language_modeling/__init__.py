"""Protocol ``language_modeling`` (the quickstart): ``config``, ``protocol`` (build) and
``report``.
"""

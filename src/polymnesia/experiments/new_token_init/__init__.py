"""Protocol ``new_token_init``: new-token initialisations x base models, relearning curves (issue
26).
"""

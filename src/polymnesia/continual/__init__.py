"""Sequential learning over many languages (Khelli et al. 2025).

``methods``: the five training methods MULTI, MONO, VANILLA, SHARED LoRA and
NON-SHARED LoRA (eqs. 1-6), registered by name; ``orders``: language orders;
``matrix``: the accuracy matrix R, its storage and composition;
``analysis``: results by script, family and resource class.
"""

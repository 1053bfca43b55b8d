"""polymnesia: multilingual continual learning of language models.

Gain languages without losing the ones you have, and measure it. The package is
organised by what each folder holds: ``data`` (sources, language table, splits),
``tokenizers``, ``models``, ``training`` (one Accelerate loop and its plugins),
``gradients`` (per-language gradient combiners), ``metrics`` (pure functions),
``evaluation``, ``pipeline`` (stages, caching, run folders), ``stages``,
``experiments`` (one module per protocol from the papers), ``reports`` and ``cli``.
"""

__version__ = "0.1.0"

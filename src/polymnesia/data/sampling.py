"""Per-language temperature sampling of a multilingual mixture.

With n_l examples in language l, the sampling probability is
q_l = p_l^(1/T) / sum_k p_k^(1/T) with p_l = n_l / sum_k n_k (Conneau et al.
2020 write the same with alpha = 1/T). T = 1 samples proportionally to size;
larger T flattens towards uniform, so small languages are seen more often.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from polymnesia.errors import ConfigError


def temperature_probs(sizes: Mapping[str, int], temperature: float) -> dict[str, float]:
    """Return q_l for every language with a positive size."""
    if temperature <= 0:
        raise ConfigError(f"sampling temperature must be > 0, got {temperature}")
    sizes = {k: v for k, v in sizes.items() if v > 0}
    if not sizes:
        raise ConfigError("temperature sampling needs at least one language with data")
    total = sum(sizes.values())
    powered = {k: (v / total) ** (1.0 / temperature) for k, v in sizes.items()}
    norm = sum(powered.values())
    return {k: v / norm for k, v in powered.items()}


def sample_mixture(
    texts_by_lang: Mapping[str, Sequence[str]], temperature: float, total: int, seed: int
) -> list[tuple[str, str]]:
    """Draw ``total`` (lang, text) pairs: languages by q_l, texts without replacement
    within a language until it is exhausted, then again from a fresh shuffle."""
    probs = temperature_probs({k: len(v) for k, v in texts_by_lang.items()}, temperature)
    rng = random.Random(seed)
    langs = sorted(probs)
    weights = [probs[lang] for lang in langs]
    pools: dict[str, list[str]] = {}
    out: list[tuple[str, str]] = []
    for lang in rng.choices(langs, weights=weights, k=total):
        if not pools.get(lang):
            pools[lang] = list(texts_by_lang[lang])
            rng.shuffle(pools[lang])
        out.append((lang, pools[lang].pop()))
    return out

"""Language orders for sequential training (paper 004, section 3.2).

The paper trains in five orders: the first sorts languages by the size of
their pretraining data, three are random shuffles, and the last places the
languages that caused the largest performance drops in an earlier run at the
end. Every order is a pure function of its inputs here; the experiment saves
the order it used with the results (``order_position`` scores).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

from polymnesia.data.languages import get_language
from polymnesia.errors import ConfigError


def validate_order(
    order: Sequence[str], languages: Sequence[str], name: str = "order"
) -> list[str]:
    """``order`` as a list if it is a permutation of ``languages``; else a one-line error."""
    seen: set[str] = set()
    repeats = [lang for lang in order if lang in seen or seen.add(lang)]  # type: ignore[func-returns-value]
    if repeats:
        raise ConfigError(
            f"{name} repeats {', '.join(sorted(set(repeats)))}; each language must appear once"
        )
    missing = [lang for lang in languages if lang not in seen]
    extra = [lang for lang in order if lang not in set(languages)]
    if missing or extra:
        parts = ([f"misses {', '.join(missing)}"] if missing else []) + (
            [f"has {', '.join(extra)} which is not a task language"] if extra else []
        )
        raise ConfigError(
            f"{name} {' and '.join(parts)}; it must order exactly: {', '.join(languages)}"
        )
    return list(order)


def resource_order(languages: Sequence[str], sizes: Mapping[str, float]) -> list[str]:
    """Languages by descending resource size (004's first order), ties by code.

    ``sizes`` is the pretraining data size per language (texts or tokens), or
    the Joshi class from the language table (:func:`joshi_sizes`).
    """
    return sorted(languages, key=lambda lang: (-float(sizes.get(lang, 0.0)), lang))


def joshi_sizes(languages: Sequence[str]) -> dict[str, float]:
    """The Joshi et al. 2020 resource class (0-5) of each language, from the language table."""

    return {lang: float(get_language(lang).joshi_class) for lang in languages}


def shuffled_order(languages: Sequence[str], seed: int) -> list[str]:
    """A seeded random permutation (004's random orders)."""
    out = list(languages)
    random.Random(seed).shuffle(out)
    return out


def destructive_last_order(shifts: Mapping[str, float], languages: Sequence[str]) -> list[str]:
    """Least destructive first, most destructive last (004's fifth order).

    ``shifts`` is the performance shift ``P_avg`` per language (eq. 9, positive
    = the average score dropped when it was learned) from an earlier run; a
    language without a value (NaN: it came first in every source order) counts
    as 0. Ties by code.
    """

    def key(lang: str) -> tuple[float, str]:
        v = float(shifts.get(lang, math.nan))
        return (0.0 if math.isnan(v) else v, lang)

    return sorted(languages, key=key)

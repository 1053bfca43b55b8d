"""Language orders for sequential training (Khelli et al. 2025, section 3.2).

The paper trains in five orders: the first sorts languages by the size of
their pretraining data, three are random shuffles, and the fifth is "randomly
shuffled" with the languages "found to be particularly destructive" placed
"toward the end of the sequence" (appendix A.1). Two versions of the fifth:
:func:`destructive_moved_last_order` follows the paper (shuffle, then move the
most destructive languages to the end); :func:`destructive_last_order` sorts
every language by its performance shift (a stronger version of the same idea). Every order is a pure
function of its inputs here; the experiment saves
the order it used with the results (``order_position`` scores).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from polymnesia.data.languages import get_language
from polymnesia.errors import ConfigError


def validate_order(
    order: Sequence[str], languages: Sequence[str], name: str = "order"
) -> list[str]:
    """``order`` as a list if it is a permutation of ``languages``; else a one-line error."""
    counts = Counter(order)
    repeats = sorted(lang for lang, n in counts.items() if n > 1)
    if repeats:
        raise ConfigError(f"{name} repeats {', '.join(repeats)}; each language must appear once")
    missing = [lang for lang in languages if lang not in counts]
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


def _shift_key(shifts: Mapping[str, float]) -> Callable[[str], tuple[float, str]]:
    def key(lang: str) -> tuple[float, str]:
        v = float(shifts.get(lang, math.nan))
        return (0.0 if math.isnan(v) else v, lang)

    return key


def destructive_last_order(shifts: Mapping[str, float], languages: Sequence[str]) -> list[str]:
    """Every language sorted by its shift: least destructive first, most destructive last.

    ``shifts`` is the performance shift ``P_avg`` per language (eq. 9, positive
    = the average score dropped when it was learned) from an earlier run; a
    language without a value (NaN: it came first in every source order) counts
    as 0. Ties by code. Not the paper's procedure (see
    :func:`destructive_moved_last_order`): the whole order follows the shifts.
    """
    return sorted(languages, key=_shift_key(shifts))


def default_destructive_count(n_languages: int) -> int:
    """About a tenth of the languages (at least 1): the paper's order 5 ends with
    six languages it names as destructive or that score worst (zh-TW, zh-CN, ja-JP,
    th-TH, km-KH, hy-AM) of 52. Our reading; the paper gives no number."""
    return max(1, round(n_languages / 10))


def destructive_moved_last_order(
    shifts: Mapping[str, float], languages: Sequence[str], seed: int, count: int | None = None
) -> list[str]:
    """004's fifth order as appendix A.1 describes it: shuffle, then move the destructive to the
    end.

    The languages are shuffled with ``seed`` (:func:`shuffled_order`); the
    ``count`` languages with the largest shift ``P_avg`` (NaN counts as 0,
    ties by code) are taken out and appended, least destructive of them first,
    so the most destructive language is learned last. The other languages keep
    their shuffled order. ``count`` defaults to
    :func:`default_destructive_count`.
    """
    n = default_destructive_count(len(languages)) if count is None else count
    if not 0 <= n <= len(languages):
        raise ConfigError(
            "destructive count must lie between 0 and the number of languages "
            f"({len(languages)}), got {n}"
        )
    ranked = sorted(languages, key=_shift_key(shifts))
    moved = ranked[len(ranked) - n :] if n else []
    return [lang for lang in shuffled_order(languages, seed) if lang not in moved] + moved

"""Seed x item intervals and paired tests from per-seed item statistics:
:func:`hierarchical_bootstrap_ci` and :func:`paired_hierarchical_bootstrap` resample the
items every seed shares once for all seeds (each seed's own items apart), and hand the
replicates to :mod:`polymnesia.metrics.seed_items`. One seed falls back to the item
bootstrap of :mod:`polymnesia.metrics.uncertainty`."""

from __future__ import annotations

import numpy as np

from polymnesia.errors import PolymnesiaError
from polymnesia.metrics.seed_items import (
    PerSeed,
    Shared,
    paired_seed_item_test,
    seed_item_interval,
)
from polymnesia.metrics.uncertainty import (
    DEFAULT_LEVEL,
    DEFAULT_RESAMPLES,
    Interval,
    ItemStatistic,
    PairedTest,
    as_strata,
    check_resampling,
    paired_bootstrap,
    resample_indices,
    stratified_bootstrap_ci,
)


def _seeds(per_seed: PerSeed, what: str, shared_items: Shared = True) -> list[list[ItemStatistic]]:
    """Each seed's strata; a crossed design (``shared_items`` True) needs the same item count
    in each stratum of every seed, a partly shared one at least the shared items in every
    seed, a nested one the same number of strata."""
    seeds = [as_strata(s) for s in per_seed]
    if not seeds:
        raise PolymnesiaError(f"{what}: need at least one seed")
    shape = [s.n for s in seeds[0]]
    if shared_items is True and any([s.n for s in x] != shape for x in seeds):
        raise PolymnesiaError(
            f"{what}: every seed must be scored on the same items (languages and counts); "
            f"got {[[s.n for s in x] for x in seeds]}"
        )
    if any(len(x) != len(shape) for x in seeds):
        raise PolymnesiaError(
            f"{what}: every seed must be scored in the same languages; got "
            f"{[len(x) for x in seeds]} strata"
        )
    if not isinstance(shared_items, bool):
        counts = list(shared_items)
        if len(counts) != len(shape) or any(
            c < 0 or c > st.n for x in seeds for c, st in zip(counts, x, strict=True)
        ):
            raise PolymnesiaError(
                f"{what}: shared item counts {counts} do not fit the strata of "
                f"{[[st.n for st in x] for x in seeds]} items"
            )
    return seeds


def _shared_counts(seeds: list[list[ItemStatistic]], shared_items: Shared) -> list[int]:
    if shared_items is True:
        return [st.n for st in seeds[0]]
    if shared_items is False:
        return [0] * len(seeds[0])
    return [int(c) for c in shared_items]


def _per_seed_replicates(
    seeds: list[list[ItemStatistic]],
    other: list[list[ItemStatistic]] | None,
    n_resamples: int,
    rng: np.random.Generator,
    shared_items: Shared = True,
) -> np.ndarray:
    """``[k, B]`` item-bootstrap replicates of each seed's score (mean over strata) of ``a``
    (minus ``b``, on the same item resample). In each stratum the items every seed shares
    (all where ``shared_items`` is True, the leading ``shared_items[t]`` of stratum ``t``
    where it is a list) get one resample per replicate, read by every seed; each seed's
    other items are resampled on their own, so a replicate keeps both counts."""
    k = len(seeds)
    reps = np.zeros((k, n_resamples))
    for t, m in enumerate(_shared_counts(seeds, shared_items)):
        shared = resample_indices(rng, m, n_resamples) if m else None
        for s in range(k):
            n_own = seeds[s][t].n - m
            own = m + resample_indices(rng, n_own, n_resamples) if n_own else None
            parts = [p for p in (shared, own) if p is not None]
            idx = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)
            value = seeds[s][t].replicates(idx)
            if other is not None:
                value = value - other[s][t].replicates(idx)
            reps[s] += value
    return reps / len(seeds[0])


def hierarchical_bootstrap_ci(
    per_seed: PerSeed,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
    shared_items: Shared = True,
) -> Interval:
    """Interval of the mean over training seeds of a score: seed and item variance combined.

    ``per_seed`` holds, for each training seed, the score's :class:`ItemStatistic` (or one
    per language: the score is then the mean over languages). With ``k >= 2`` seeds the
    interval is :func:`seed_item_interval` (:class:`SeedItemSE`): the seed spread ``s^2 / k``
    plus the part of the item variance the seeds share (the seed x item interaction, which
    ``s^2`` already holds, counted once), with a Student t quantile at Satterthwaite degrees
    of freedom, so that with few seeds the interval reaches past the seed values as a
    t-interval does (a percentile bootstrap over 3 seeds cannot). ``shared_items`` says
    which items the seeds share (:data:`Shared`; :func:`polymnesia.items.across_seeds`
    finds it): ``True`` (the default; every protocol scores its seeds on one test set), one
    item resample per replicate read by every seed (crossed design); ``False``, a resample
    per seed (nested design: the interval is the t-interval over the seeds); per stratum
    the number of leading items every seed shares, those resampled together and each
    seed's others on their own. With one seed it is the item bootstrap
    (:func:`stratified_bootstrap_ci`), and says so.
    """
    check_resampling(n_resamples, level)
    seeds = _seeds(per_seed, "hierarchical bootstrap", shared_items)
    points = [float(np.mean([s.value() for s in x])) for x in seeds]
    estimate = float(np.mean(points))
    if len(seeds) == 1:
        iv = stratified_bootstrap_ci(seeds[0], n_resamples=n_resamples, level=level, seed=seed)
        return Interval(iv.estimate, iv.low, iv.high, iv.n, level, f"one seed: {iv.method}")
    reps = _per_seed_replicates(seeds, None, n_resamples, np.random.default_rng(seed), shared_items)
    n = sum(s.n for s in seeds[0])
    return seed_item_interval(
        points, reps, n=n, level=level, shared_items=shared_items, estimate=estimate
    )


def paired_hierarchical_bootstrap(
    a: PerSeed,
    b: PerSeed,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    level: float = DEFAULT_LEVEL,
    seed: int = 0,
    shared_items: Shared = True,
) -> PairedTest:
    """``mean_seeds(score(a)) - mean_seeds(score(b))`` with seed and item variance combined.

    Seed ``i`` of ``a`` is paired with seed ``i`` of ``b`` (the same training seed of two
    arms), and both arms share each item resample; with ``k >= 2`` seeds the test is
    :func:`paired_seed_item_test` of the per-seed differences (``shared_items`` as in
    :func:`hierarchical_bootstrap_ci`); with one seed it is :func:`paired_bootstrap` and
    says so.
    """
    check_resampling(n_resamples, level)
    sa, sb = _seeds(a, "arm a", shared_items), _seeds(b, "arm b", shared_items)
    counts = [[s.n for s in x] for x in sa], [[s.n for s in y] for y in sb]
    if counts[0] != counts[1]:
        k = next((i for i, (x, y) in enumerate(zip(*counts, strict=False)) if x != y), 0)
        raise PolymnesiaError(
            f"paired seeds and items must match: {len(sa)} vs {len(sb)} seeds, "
            f"{[s.n for s in sa[k]]} vs {[s.n for s in sb[k]]} items"
        )
    if len(sa) == 1:
        t = paired_bootstrap(sa[0], sb[0], n_resamples=n_resamples, level=level, seed=seed)
        return PairedTest(
            t.effect, t.low, t.high, t.p_value, t.n, f"one seed: {t.method}", level, n_resamples
        )
    diffs = [
        float(np.mean([x.value() - y.value() for x, y in zip(p, q, strict=True)]))
        for p, q in zip(sa, sb, strict=True)
    ]
    reps = _per_seed_replicates(sa, sb, n_resamples, np.random.default_rng(seed), shared_items)
    n = sum(s.n for s in sa[0])
    return paired_seed_item_test(
        diffs, reps, n=n, level=level, shared_items=shared_items, effect=float(np.mean(diffs))
    )

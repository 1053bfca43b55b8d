"""The ``new_token_init`` evidence: bits per byte of each (base, init, step) cell with its
interval, paired differences against ``mean``, and the claims, all from the per-text items.

Every arm is scored on the same test texts, so comparisons are paired text by text (and seed
by seed): :func:`polymnesia.metrics.hierarchical.paired_hierarchical_bootstrap`, which is the
paired bootstrap over texts (Koehn 2004) with one training seed and, with several, the text
bootstrap's variance plus the variance over seeds, with a Student t quantile. A group's score
is the unweighted mean over its languages, texts resampled within each language.

Claims (the expected sign of an effect in bits per byte; lower is better):

1. INIT beats mean at 0 steps, on each base: ``bpb(base, INIT) - bpb(base, mean) < 0``.
2. Active forgetting helps relearning (Aggarwal et al. 2024), with mean, after the longest
relearning:
   ``bpb(af, mean) - bpb(standard, mean) < 0``.
3. Active forgetting narrows the gap between INIT and mean (after the longest relearning):
   ``[bpb(af, INIT) - bpb(af, mean)] - [bpb(standard, INIT) - bpb(standard, mean)] > 0``
   (INIT's gain over mean is smaller on the active-forgetting base), a paired difference of
   paired differences on the same texts. It is the same quantity as "active forgetting's
   advantage shrinks with INIT instead of mean".

The claims rest on the adapting group. ``normal`` is left out of claims 1 and 3: it is
``mean`` plus noise of 1e-9 times the rows' covariance, so a difference of 1e-5 bits per
byte could still "hold". Claims 1 and 3 are this project's questions (issue 26), not a paper's:
they are extensions, Holm-corrected as a family of their own; claim 2 (Aggarwal et al. 2024's
finding) is
the paper family.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from polymnesia.errors import DataError
from polymnesia.items import ItemSet
from polymnesia.metrics.hierarchical import hierarchical_bootstrap_ci, paired_hierarchical_bootstrap
from polymnesia.metrics.uncertainty import Interval, ItemStatistic, PairedTest
from polymnesia.reports.claims import Claim, claim_from_test, not_applicable, slug

METRIC = "bits_per_byte"
REFERENCE = "mean"
#: initialisations whose claims against mean are not made (see the module docstring)
NO_CLAIM = ("mean", "normal")


@dataclass(frozen=True)
class Cell:
    base: str
    init: str
    step: int


class Evidence:
    """The run's lm item sets of ``relearn_new_tokens`` stages, indexed by cell, seed and
    language; :meth:`per_seed` gives what the bootstrap functions take."""

    def __init__(self, sets: Iterable[ItemSet], n_resamples: int = 1000, seed: int = 0) -> None:
        self.sets: dict[tuple[Cell, int, str], ItemSet] = {}
        for s in sets:
            if s.kind != "lm" or s.setting is None or s.step is None:
                continue
            key = (Cell(s.model, s.setting, int(s.step)), int(s.seed or 0), s.lang)
            if key in self.sets:
                raise DataError(f"two item sets for {key}; one relearn stage per base and init")
            self.sets[key] = s
        self.seeds = sorted({k[1] for k in self.sets})
        self.cells = sorted({k[0] for k in self.sets}, key=lambda c: (c.step, c.base, c.init))
        self.n_resamples = n_resamples
        self.seed = seed

    def bases(self) -> list[str]:
        return list(dict.fromkeys(c.base for c in self.cells))

    def inits(self) -> list[str]:
        return list(dict.fromkeys(c.init for c in self.cells))

    def steps(self) -> list[int]:
        return sorted({c.step for c in self.cells})

    def has(self, cell: Cell, langs: Sequence[str]) -> bool:
        return all((cell, s, lang) in self.sets for s in self.seeds for lang in langs)

    def per_seed(self, cell: Cell, langs: Sequence[str]) -> list[list[ItemStatistic]]:
        """``[seed][language]`` statistics of ``cell`` (every seed that scored it)."""
        out = []
        for seed in self.seeds:
            found = [self.sets.get((cell, seed, lang)) for lang in langs]
            if any(f is None for f in found):
                continue
            out.append([f.statistic(METRIC) for f in found if f is not None])
        if not out:
            raise DataError(f"no items of {cell.base}/{cell.init} at step {cell.step} in {langs}")
        return out

    def interval(self, cell: Cell, langs: Sequence[str]) -> Interval:
        """The cell's score over ``langs`` (mean over languages and seeds) with its interval."""
        return hierarchical_bootstrap_ci(
            self.per_seed(cell, langs), n_resamples=self.n_resamples, seed=self.seed
        )

    def versus(self, a: Cell, b: Cell, langs: Sequence[str]) -> PairedTest:
        """``score(a) - score(b)`` paired by seed and text."""
        return paired_hierarchical_bootstrap(
            self.per_seed(a, langs),
            self.per_seed(b, langs),
            n_resamples=self.n_resamples,
            seed=self.seed,
        )

    def gap_change(
        self, init: str, af: str, standard: str, step: int, langs: Sequence[str]
    ) -> PairedTest:
        """``[af(init) - af(mean)] - [standard(init) - standard(mean)]``, paired by seed and
        text.
        """

        def gain(base: str) -> list[list[ItemStatistic]]:
            a = self.per_seed(Cell(base, init, step), langs)
            b = self.per_seed(Cell(base, REFERENCE, step), langs)
            return [
                [difference(x, y) for x, y in zip(p, q, strict=True)]
                for p, q in zip(a, b, strict=True)
            ]

        return paired_hierarchical_bootstrap(
            gain(af), gain(standard), n_resamples=self.n_resamples, seed=self.seed
        )


#: where the claims that are this project's own questions (not a paper's) come from
QUESTION = "polymnesia's question (new-token initialisation; no paper states it)"


def difference(a: ItemStatistic, b: ItemStatistic) -> ItemStatistic:
    """``a - b`` as one statistic of the same items (both resampled with the same indices)."""
    if a.n != b.n:
        raise DataError(f"a paired difference needs the same items; got {a.n} and {b.n}")
    k = a.columns.shape[1]

    def reduce(x: np.ndarray) -> np.ndarray:
        return a.reduce(x[..., :k]) - b.reduce(x[..., k:])

    return ItemStatistic(
        np.concatenate([a.columns, b.columns], axis=1), reduce, f"{a.name} - {b.name}"
    )


def claims(
    ev: Evidence, adapting: Sequence[str], af: str | None, standard: str | None
) -> list[Claim]:
    """The claims of the module docstring that this run can test, before the correction
    (:func:`~polymnesia.reports.claims.correct`, after the seed band)."""
    out: list[Claim] = []
    steps = ev.steps()
    if not steps:
        return out
    last = steps[-1]
    for base in ev.bases():
        for init in ev.inits():
            a, b = Cell(base, init, 0), Cell(base, REFERENCE, 0)
            if init in NO_CLAIM or not (ev.has(a, adapting) and ev.has(b, adapting)):
                continue
            out.append(
                claim_from_test(
                    f"{init} beats mean at 0 steps ({base} base)",
                    -1,
                    ev.versus(a, b, adapting),
                    effect_label=f"bpb({init}) - bpb(mean)",
                    source=QUESTION,
                    id=f"nti.{slug(init)}_beats_mean.step0.{slug(base)}",
                    kind="extension",
                )
            )
    if af is not None and standard is not None:
        a, b = Cell(af, REFERENCE, last), Cell(standard, REFERENCE, last)
        if ev.has(a, adapting) and ev.has(b, adapting):
            out.append(
                claim_from_test(
                    f"active forgetting relearns better than standard pretraining (mean, {last} "
                    "steps)",
                    -1,
                    ev.versus(a, b, adapting),
                    effect_label=f"bpb({af}) - bpb({standard})",
                    source="Aggarwal et al. 2024",
                    id="nti.af_relearns_better",
                )
            )
        for init in ev.inits():
            cells = [Cell(x, i, last) for x in (af, standard) for i in (init, REFERENCE)]
            if init in NO_CLAIM or not all(ev.has(c, adapting) for c in cells):
                continue
            claim = claim_from_test(
                f"active forgetting narrows the gap between {init} and mean ({last} steps)",
                1,
                ev.gap_change(init, af, standard, last, adapting),
                effect_label=f"gain of {init} on {af} minus gain on {standard}",
                source=QUESTION,
                id=f"nti.af_narrows_gap.{slug(init)}",
                kind="extension",
            )
            gain = ev.versus(Cell(standard, init, last), Cell(standard, REFERENCE, last), adapting)
            if gain.effect >= 0:
                claim = not_applicable(
                    claim, f"{init} does not beat mean on the {standard} base at {last} steps"
                )
            out.append(claim)
    return out

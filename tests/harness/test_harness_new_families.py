"""The offline task families the two-phase CFT paper's abilities need besides genre and
continuation:
title and quote (one IFEval kind each), verse reference lookup and translation from English
(multiple choice), and the shipped two_phase configs measuring EA and MA on at least three
tasks each that are not a Phase 2 set's own training task."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_helpers import make_prepared, verse

from polymnesia.experiments.loading import load_config
from polymnesia.harness.docs import write_task_data
from polymnesia.harness.tasks import HARNESS_TASKS
from polymnesia.instructions.ifeval import KINDS, check_following
from polymnesia.io import read_jsonl
from polymnesia.tokenizers.bpe import IM_END

TASKS = ["poly_title_en", "poly_quote_fr", "poly_reference_fr", "poly_translate_fr"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def docs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("new_families")
    prep = make_prepared(root / "prep")
    counts = write_task_data(prep, root / "docs", TASKS, n=8, n_fewshot=2)
    assert counts == dict.fromkeys(TASKS, 8)
    return root / "docs"


def test_title_and_quote_are_one_ifeval_kind_each(docs: Path) -> None:
    for task, checker in (
        ("poly_title_en", "detectable_format:title"),
        ("poly_quote_fr", "startend:quotation"),
    ):
        rows = read_jsonl(docs / f"{task}.test.jsonl")
        assert {tuple(d["instruction_id_list"]) for d in rows} == {(checker,)}
        assert all(
            check_following(d["instruction_id_list"], d["kwargs"], d["target"]) == [True]
            for d in rows
        )


def test_reference_docs_pick_the_verse_id_among_four(docs: Path) -> None:
    for d in read_jsonl(docs / "poly_reference_fr.test.jsonl"):
        assert d["choices"][d["gold"]] == d["id"] + IM_END and len(set(d["choices"])) == 4
        assert verse("fr", int(d["id"].split(".")[2])) in d["prompt"]
        assert "BOOK.CHAPTER.VERSE" in d["prompt"]


def test_translate_docs_ask_for_the_aligned_verse(docs: Path) -> None:
    for d in read_jsonl(docs / "poly_translate_fr.test.jsonl"):
        i = int(d["id"].split(".")[2])
        assert verse("en", i) in d["prompt"] and "from English into French" in d["prompt"]
        assert d["choices"][d["gold"]] == verse("fr", i) + IM_END and len(set(d["choices"])) == 4
    assert "poly_translate_en" not in HARNESS_TASKS  # English into English is no task
    assert HARNESS_TASKS.get("poly_translate_fr").data_languages == ("fr", "en")
    assert HARNESS_TASKS.get("poly_reference_fr").data_languages == ("fr",)


#: the instruction kind of a Phase 2 set that each task family asks (None: no set's)
FAMILY_KIND = {
    "poly_genre": "genre",
    "poly_title": "title",
    "poly_quote": "quote",
    "poly_ifeval": "ifeval",
    "poly_reference": "reference",  # the dissimilar set's question, asked as multiple choice
    "poly_translate": None,  # English -> X; the dissimilar set translates X -> Y (not English)
    "poly_continue_gen": "continue",
    "poly_continue_mc": None,  # multiple choice: no set trains it
}


@pytest.mark.parametrize("name", ["two_phase.yaml", "two_phase_smoke.yaml"])
def test_abilities_have_three_tasks_that_phase2_does_not_train(name: str) -> None:
    """EA and MA each average >= 3 offline task families; no MA task is one the similar set
    trains in that language (it trained exactly the old MA task, genre in fr/de, so "similar
    keeps MA" held by construction), and most MA families are trained by no Phase 2 set."""
    from polymnesia.instructions.sets import DISSIMILAR_KINDS, PHASE1_KINDS

    cfg = load_config(ROOT / "configs" / name)
    e = cfg.evaluate.harness
    trained: dict[str, set[tuple[str, str]]] = {}
    for pair in cfg.pairs:
        s = cfg.sets[pair.phase2]
        default = PHASE1_KINDS if s.kind == "phase2_similar" else DISSIMILAR_KINDS
        kinds = set(s.tasks or default)
        kinds |= {"ifeval"} if kinds & set(KINDS) else set()  # poly_ifeval asks every kind
        trained[s.kind] = {(k, lang) for k in kinds for lang in s.languages}
    ma = [HARNESS_TASKS.get(t) for t in e.multilingual]
    assert all(t.lang != "en" for t in ma)
    assert not [t.name for t in ma if (FAMILY_KIND[t.family], t.lang) in trained["phase2_similar"]]
    untrained = {
        t.family
        for t in ma
        if not any((FAMILY_KIND[t.family], t.lang) in v for v in trained.values())
    }
    assert len(untrained) >= 2, untrained
    assert len({HARNESS_TASKS.get(t).family for t in e.english}) >= 3
    assert len({t.family for t in ma}) >= 3

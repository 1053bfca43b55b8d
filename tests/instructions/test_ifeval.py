"""Verifiable instructions: correct responses pass IFEval's checkers, wrong ones fail; Punkt
offline.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from polymnesia.errors import DataError
from polymnesia.instructions.ifeval import (
    INSTRUCTION_LANGUAGES,
    KINDS,
    TEMPLATES,
    check_following,
    item_passes,
    response,
    three_parts,
    verifiable_item,
)

EN = "In the beginning, God created the heavens and the earth."
JA = "初めに、神は天と地を創造された。"


def test_responses_by_hand() -> None:
    assert response("quote", EN) == f'"{EN}"'
    assert response("no_comma", EN) == "In the beginning God created the heavens and the earth."
    assert response("no_comma", "a、b،c，d") == "abcd"
    assert response("title", EN) == f"<<In the beginning,>>\n{EN}"
    assert response("end_phrase", EN) == f"{EN}\nAmen."
    assert response("bullets", EN) == (
        "* In the beginning, God\n* created the heavens\n* and the earth."  # 10 words: 4, 3, 3
    )


def test_three_parts_words_and_characters() -> None:
    assert three_parts("a b c d") == ["a b", "c", "d"]
    assert three_parts("abcdefg") == ["abc", "de", "fg"]  # unspaced: by characters
    with pytest.raises(DataError, match="too short"):
        three_parts("ab")


def test_templates_cover_every_kind() -> None:
    assert INSTRUCTION_LANGUAGES[0] == "en" and len(INSTRUCTION_LANGUAGES) == 11
    assert all(set(t) == set(KINDS) for t in TEMPLATES.values())
    with pytest.raises(DataError, match="no verifiable-instruction templates in 'sw'"):
        verifiable_item("quote", "sw", EN)


@pytest.mark.parametrize("lang", INSTRUCTION_LANGUAGES)
def test_correct_responses_pass_lm_eval_checkers(lang: str) -> None:
    verse = JA if lang == "ja" else EN
    for kind in KINDS:
        assert item_passes(verifiable_item(kind, lang, verse)), (lang, kind)


def test_wrong_responses_fail() -> None:
    for kind, wrong in [
        ("quote", EN),
        ("no_comma", EN),
        ("title", EN),
        ("end_phrase", EN),
        ("bullets", "* one\n* two"),
    ]:
        item = verifiable_item(kind, "en", EN)
        assert check_following(item.instruction_id_list, item.kwargs, wrong) == [False], kind


def test_punkt_offline_without_download(tmp_path: Path) -> None:
    """A fresh cache, no NLTK data anywhere, downloads made to fail: the checkers still run."""
    code = (
        "import nltk\n"
        "def no(*a, **k): raise SystemExit('download attempted')\n"
        "nltk.download = no\n"
        "from polymnesia.instructions.punkt import ensure_punkt\n"
        "ensure_punkt()\n"
        "from lm_eval.tasks.ifeval import instructions_util as u\n"
        "print(u.count_sentences('Mr. Smith went to Washington. He arrived at 3 p.m. today. "
        "Then he left.'))\n"
        "print(nltk.word_tokenize('It is Mr. Smith.'))\n"
    )
    env = {
        **os.environ,
        "POLYMNESIA_CACHE": str(tmp_path / "cache"),
        "NLTK_DATA": str(tmp_path / "none"),
        "HOME": str(tmp_path),
    }
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.strip().splitlines()
    # 3 sentences: "Mr." and "p.m." are known abbreviations of the English model
    assert lines[-2:] == ["3", "['It', 'is', 'Mr.', 'Smith', '.']"]
    assert (tmp_path / "cache/data/nltk/tokenizers/punkt_tab/english/abbrev_types.txt").exists()

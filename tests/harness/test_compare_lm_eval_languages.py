"""Every Belebele task of the installed lm-eval maps to a language, family and script."""

from __future__ import annotations

from pathlib import Path

import lm_eval

from polymnesia.harness.lm_eval_languages import EXTRA_LANGUAGES, task_info
from polymnesia.harness.run import task_lang


def belebele_tasks() -> list[str]:
    folder = Path(lm_eval.__file__).parent / "tasks" / "belebele"
    return sorted(p.stem for p in folder.glob("belebele_*.yaml"))


def test_every_belebele_task_maps() -> None:
    tasks = belebele_tasks()
    assert len(tasks) >= 122  # lm-eval 0.4.13 has 122
    lost = [t for t in tasks if task_lang(t) == "und"]  # outside polymnesia's language table
    assert len(lost) >= 26  # 26 in lm-eval 0.4.13: each has its row
    assert {t.split("_")[1] for t in lost} <= set(EXTRA_LANGUAGES)
    infos = {t: task_info(t) for t in tasks}
    assert all(i.code != "und" and i.family != "unknown" for i in infos.values())
    assert all(i.script != "unknown" for i in infos.values())
    assert infos["belebele_acm_Arab"].name == "Mesopotamian Arabic"
    assert infos["belebele_acm_Arab"].family == "Afro-Asiatic"
    assert infos["belebele_acm_Arab"].resource == "unknown"  # no Joshi class assigned
    assert infos["belebele_fra_Latn"].resource == "high"
    # the script is the code's: romanized Hindi is Latin, not Devanagari
    assert infos["belebele_hin_Latn"].script == "Latin"
    assert infos["belebele_hin_Deva"].script == "Devanagari"
    assert infos["belebele_ory_Orya"].script == "Oriya"


def test_unknown_codes_keep_their_script() -> None:
    info = task_info("sib200_zzz_Tfng")
    assert (info.code, info.family, info.script, info.resource) == (
        "zzz",
        "unknown",
        "Tifinagh",
        "unknown",
    )
    assert task_info("custom_reading_task").code == "und"

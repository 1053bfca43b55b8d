"""The shipped lm-eval task table: YAML in sync, registry, tags, task-name checks."""

from __future__ import annotations

import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.harness.tasks import (
    FAMILIES,
    HARNESS_TASKS,
    TASK_DIR,
    check_tasks,
    expand,
    render_task_yamls,
    tags,
)


def test_shipped_yaml_equals_the_generator() -> None:
    files = render_task_yamls()
    shipped = {p.name for p in TASK_DIR.iterdir() if p.name.startswith(("poly_", "_poly_"))}
    assert shipped == set(files), "run `python -m polymnesia.harness.tasks`"
    for name, text in files.items():
        assert (TASK_DIR / name).read_text(encoding="utf-8") == text, name


def test_registry_has_every_family_and_language() -> None:
    n = sum(len(f.languages) for f in FAMILIES.values())
    # genre, continue_mc, continue_gen, reference: 22; translate: 21 (not English);
    # ifeval, title, quote: 11 (instruction templates)
    assert len(HARNESS_TASKS.names()) == n == 22 * 4 + 21 + 11 * 3
    t = HARNESS_TASKS.get("poly_ifeval_ja")
    assert (t.family, t.lang, t.ability) == ("poly_ifeval", "ja", "MA")
    assert HARNESS_TASKS.get("poly_genre_en").ability == "EA"
    assert "poly_ifeval_sw" not in HARNESS_TASKS  # no instruction templates in Swahili


def test_tags_expand_in_order_without_repeats() -> None:
    ea = [
        "poly_continue_gen_en",
        "poly_continue_mc_en",
        "poly_genre_en",
        "poly_ifeval_en",
        "poly_quote_en",
        "poly_reference_en",
        "poly_title_en",
    ]
    assert tags()["poly_ea"] == ea
    assert expand(["poly_genre_fr", "poly_ea", "poly_genre_en", "mmlu"]) == ["poly_genre_fr", *ea]
    assert all(not n.endswith("_en") for n in tags()["poly_ma"])


def test_a_missing_lm_eval_is_one_line_at_validation(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Not at the harness stage, after all training: when the config is read."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "lm_eval" else real(name, *a)
    )
    with pytest.raises(PolymnesiaError, match=r"need the lm-eval package.*polymnesia\[harness\]"):
        check_tasks(["poly_ma"], offline=True)


def test_a_missing_lm_eval_stops_the_command_before_the_run(  # type: ignore[no-untyped-def]
    isolated_cache, monkeypatch, capsys
) -> None:
    import importlib.util
    from pathlib import Path

    from polymnesia.cli.main import main

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "lm_eval" else real(name, *a)
    )
    config = Path(__file__).resolve().parents[2] / "configs" / "two_phase_smoke.yaml"
    assert main(["run", str(config), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "lm-eval package" in err, err


def test_offline_online_task_is_one_line_naming_offline_tasks() -> None:
    with pytest.raises(PolymnesiaError) as e:
        check_tasks(["poly_genre_en", "mmlu", "xquad_de"], offline=True)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith("lm-eval task(s) mmlu, xquad_de need the Hugging Face Hub")
    assert "poly_genre_LANG" in msg and "poly_ifeval languages: en, fr" in msg
    assert check_tasks(["poly_ma"], offline=True) == tags()["poly_ma"]


def test_online_names_pass_through() -> None:
    assert check_tasks(["mmlu", "poly_genre_de"], offline=False, verify_online=False) == [
        "poly_genre_de"
    ]
    with pytest.raises(PolymnesiaError, match="no lm-eval task named"):
        check_tasks([], offline=False)


def test_online_unknown_name_is_refused_with_a_suggestion() -> None:
    with pytest.raises(PolymnesiaError, match=r"unknown lm-eval task\(s\) hellaswagg.*'hellaswag'"):
        check_tasks(["hellaswagg"], offline=False)


def test_empty_and_misspelt_offline_names_are_refused_online_too() -> None:
    with pytest.raises(PolymnesiaError, match=r"^an lm-eval task name is empty \(''\)"):
        check_tasks(["poly_ma", ""], offline=False, verify_online=False)
    with pytest.raises(
        PolymnesiaError,
        match=r"^unknown offline task\(s\) POLY_GENRE_EN \(did you mean 'poly_genre_en'\?\)",
    ):
        check_tasks(["POLY_GENRE_EN"], offline=False, verify_online=False)
    with pytest.raises(PolymnesiaError, match=r"unknown offline task\(s\) poly_genre_xx"):
        check_tasks(["poly_genre_xx"], offline=True)


def test_an_unknown_hub_task_stops_the_run_before_anything_is_written(  # type: ignore[no-untyped-def]
    isolated_cache, monkeypatch, tmp_path, capsys
) -> None:
    """Reading a config does not build lm-eval's task index (seconds); `validate` and the
    run's preflight do, so a typo does not wait for the harness stage, after all the
    training."""
    from pathlib import Path

    from polymnesia.cli.main import main

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    config = Path(__file__).resolve().parents[2] / "configs" / "two_phase_smoke.yaml"
    argv = ["run", str(config), "evaluate.harness.english=[hellaswagg]"]
    assert main([*argv, "--dry-run"]) == 2  # the dry run checks the names, as validate does
    assert "unknown lm-eval task(s) hellaswagg" in capsys.readouterr().err
    assert main(["validate", str(config), "--set", "evaluate.harness.english=[hellaswagg]"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown lm-eval task(s) hellaswagg" in err, err
    assert "(did you mean 'hellaswag'?)" in err
    assert main(["validate", str(config), "--set", "evaluate.harness.english=[hellaswag]"]) == 0
    capsys.readouterr()
    assert main([*argv, "--run-dir", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "unknown lm-eval task(s) hellaswagg" in err, err
    assert not (tmp_path / "run").exists()
    assert not (isolated_cache / "stages").exists() or not any(
        (isolated_cache / "stages").iterdir()
    )


def test_lm_eval_indexes_every_shipped_name() -> None:
    from lm_eval.tasks import TaskManager

    tm = TaskManager(include_path=str(TASK_DIR), include_defaults=False)
    assert set(HARNESS_TASKS.names()) <= set(tm.all_subtasks)
    assert {"poly_ea", "poly_ma", "poly_genre"} <= set(tm.all_tags)


def test_ls_tasks(capsys: pytest.CaptureFixture[str]) -> None:
    from polymnesia.cli.main import main

    assert main(["ls", "lm-eval-tasks"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("lm-eval-tasks:\n")
    assert "poly_ifeval_en" in out and "(the two-phase CFT paper: IFEval)" in out

"""Every config under configs/ loads, validates and builds a stage plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from polymnesia.cli.main import main

ROOT = Path(__file__).resolve().parents[2] / "configs"
CONFIGS = sorted(ROOT.rglob("*.yaml"))  # configs/gpu/ included


def test_there_are_configs():
    assert any(p.name == "quickstart.yaml" for p in CONFIGS)


#: configs whose evaluation names lm-eval tasks on the Hub: offline (as in these tests) their
#: validation must stop in one line naming the offline tasks, before anything runs
NEEDS_HUB_TASKS = {"two_phase_paper"}


@pytest.mark.parametrize(
    "path", CONFIGS, ids=[str(p.relative_to(ROOT).with_suffix("")) for p in CONFIGS]
)
def test_config_validates_and_plans(path: Path, isolated_cache: Path, capsys):
    if path.stem in NEEDS_HUB_TASKS:
        assert main(["validate", str(path)]) == 2
        err = capsys.readouterr().err
        assert "need the Hugging Face Hub, which is offline; offline tasks:" in err
        assert err.count("\n") == 1
        # its data prepares English only: an offline task in another language is refused
        assert (
            main(
                [
                    "validate",
                    str(path),
                    "--set",
                    "evaluate.harness.english=[poly_genre_en]",
                    "--set",
                    "evaluate.harness.multilingual=[poly_genre_en]",
                ]
            )
            == 0
        )
        return
    assert main(["validate", str(path)]) == 0
    assert capsys.readouterr().out.startswith("ok ")


def test_ls_lists_every_category(capsys):
    assert main(["ls"]) == 0
    out = capsys.readouterr().out
    for category in (
        "experiments:",
        "stages:",
        "sources:",
        "languages:",
        "metrics:",
        "presets:",
        "combiners:",
        "plugins:",
    ):
        assert category in out
    for name in (
        "language_modeling",
        "prepare_data",
        "bible",
        "udhr",
        "lf_mlf",
        "pcgrad",
        "tiny",
        "bits_per_byte",
    ):
        assert f"  {name} " in out, name


def test_ls_unknown_category_is_one_line(capsys):
    assert main(["ls", "stagez"]) == 2
    err = capsys.readouterr().err
    assert "unknown category 'stagez' (did you mean 'stages'?)" in err


def test_data_info_udhr(capsys):
    assert main(["data", "info", "udhr"]) == 0
    out = capsys.readouterr().out
    assert "\nen    English" in out and "licence" in out.lower()
    assert main(["data", "info", "udhr", "--json"]) == 0
    assert '"en"' in capsys.readouterr().out


@pytest.mark.parametrize(
    "path", CONFIGS, ids=[str(p.relative_to(ROOT).with_suffix("")) for p in CONFIGS]
)
def test_resolved_config_reloads_as_itself(path: Path, tmp_path: Path, isolated_cache: Path):
    """A run folder's config.yaml (the resolved config) loads again to the same config: what
    `polymnesia report RUN` and resuming with `polymnesia run RUN/config.yaml` read."""
    from polymnesia.experiments.loading import load_config
    from polymnesia.io import atomic_write_yaml

    overrides = (
        [
            "evaluate.harness.english=[poly_genre_en]",
            "evaluate.harness.multilingual=[poly_genre_fr]",
        ]
        if path.stem in NEEDS_HUB_TASKS
        else []
    )
    cfg = load_config(path, overrides)
    atomic_write_yaml(tmp_path / "config.yaml", cfg.model_dump(mode="json"))
    again = load_config(tmp_path / "config.yaml")
    assert again.model_dump(mode="json") == cfg.model_dump(mode="json")


def test_a_renamed_key_is_read_with_one_warning_line(tmp_path: Path, isolated_cache: Path, capsys):
    text = (ROOT / "lifelong_smoke.yaml").read_text()
    assert "  languages: [en, fr]\n" in text
    old = tmp_path / "old.yaml"
    old.write_text(text.replace("  languages: [en, fr]\n", "  pretraining: [en, fr]\n", 1))
    assert main(["validate", str(old)]) == 0
    err = capsys.readouterr().err
    assert err == (
        "polymnesia: warning: base.pretraining is now base.languages; the old name is still read\n"
    )
    both = tmp_path / "both.yaml"
    both.write_text(
        text.replace("  languages: [en, fr]\n", "  languages: [en]\n  pretraining: [en, fr]\n", 1)
    )
    assert main(["validate", str(both)]) == 2
    assert "base.pretraining is the old name of base.languages; give only base.languages" in (
        capsys.readouterr().err
    )


def test_the_renamed_key_warning_is_a_config_warning_for_library_users():
    from polymnesia.config.base import renamed
    from polymnesia.errors import ConfigWarning

    with pytest.warns(ConfigWarning, match=r"^a\.b is now a\.c"):
        assert renamed({"b": 1, "d": 2}, {"b": "c"}, "a") == {"c": 1, "d": 2}

"""Trivial mistakes get one line at once, in polymnesia's words (issue 42, the CLI points):
a memory size without a unit, ``data info local`` without ``path=``, a key at the wrong level,
pydantic's wording, and warnings repeated or from the model libraries' own deprecations."""

from __future__ import annotations

import argparse
import warnings

import pytest

from polymnesia.cli.main import _one_line_config_warnings, main, quiet_library_deprecations
from polymnesia.cli.plan import memory_size
from polymnesia.errors import ConfigError, ConfigWarning
from polymnesia.experiments import EXPERIMENTS, load_config, model_checks
from polymnesia.experiments.preflight import build_specs

QUICKSTART = "configs/quickstart.yaml"


def one_error_line(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("polymnesia: error: "), err
    assert "Traceback" not in err and "Input should" not in err, err
    return err


def test_a_memory_size_without_a_unit_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="'80' has no unit.*--memory 80GB"):
        memory_size("80")
    assert memory_size("80GB") == memory_size("80G") == 80 * 2**30
    assert memory_size("2097152B") == 2**21  # bytes, said so
    with pytest.raises(SystemExit) as e:
        main(["plan", QUICKSTART, "--memory", "80"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--memory: '80' has no unit" in err, err


def test_data_info_local_without_path_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    err = one_error_line(capsys, "data", "info", "local")
    assert "data source 'local' needs option path=" in err and "accepted: path, format" in err


def test_a_source_option_it_does_not_take_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    err = one_error_line(capsys, "data", "info", "local", "pth=corpus")
    assert "data source 'local' has no option 'pth'; accepted: path" in err


@pytest.mark.parametrize(
    ("override", "hint"),
    [("preset=small", "model.preset"), ("lr=0.001", "train.lr")],
)
def test_a_key_one_level_too_high_suggests_its_section(
    override: str, hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_error_line(capsys, "validate", QUICKSTART, "--set", override)
    assert f"(did you mean '{hint}'?)" in err, err


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("groups=3", "bad value for 'groups': 3: expected a section of keys"),
        ("data.split_fractions=3", "bad value for 'data.split_fractions': 3: expected a list"),
        ("train.steps=abc", "bad value for 'train.steps': 'abc': expected a whole number"),
        ("train.steps=1.5", "expected a whole number, not a fraction"),
        ("model.dtype=float8", "accepted: 'float32', 'bfloat16' or 'float16'"),
        ("model.preset={a: 1}", "'model.preset': a section of keys: expected a text"),
        ("train.eval_every=0", "bad value for 'train.eval_every': 0: must be greater than 0"),
        ("model.dropout=1", "bad value for 'model.dropout': 1: must be less than 1.0"),
    ],
)
def test_type_errors_are_in_polymnesias_words(
    override: str, words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = one_error_line(capsys, "validate", QUICKSTART, "--set", override)
    assert words in err, err
    assert "valid dictionary" not in err and "a mapping:" not in err, err


def test_a_repeated_warning_is_shown_once(capsys: pytest.CaptureFixture[str]) -> None:
    shown: list[str] = []
    show = _one_line_config_warnings(lambda message, *a, **k: shown.append(str(message)))
    for where in ("a.py", "b.py", "c.py"):
        show(UserWarning("the head is initialised afresh"), UserWarning, where, 1)
        show(ConfigWarning("seeds: one seed"), ConfigWarning, where, 1)
    show(UserWarning("another note"), UserWarning, "a.py", 2)
    assert shown == ["the head is initialised afresh", "another note"]
    assert capsys.readouterr().err == "polymnesia: warning: seeds: one seed\n"


def test_the_model_libraries_deprecations_are_filtered() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        quiet_library_deprecations()
        for module in ("transformers.generation.utils", "accelerate.state", "peft"):
            warnings.warn_explicit("`x` is deprecated", FutureWarning, "lib.py", 1, module=module)
            warnings.warn_explicit("old", DeprecationWarning, "lib.py", 1, module=module)
        warnings.warn_explicit("mine", ConfigWarning, "cfg.py", 1, module="polymnesia.config")
        warnings.warn_explicit("theirs", UserWarning, "lib.py", 1, module="transformers")
        warnings.warn_explicit("lookalike", FutureWarning, "x.py", 1, module="transformers_x")
    assert [str(w.message) for w in caught] == ["mine", "theirs", "lookalike"]


@pytest.mark.parametrize("switch", ["1", "0"])
def test_an_uncached_hub_model_offline_is_refused_by_the_dry_run(
    isolated_cache: object,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    switch: str,
) -> None:
    """Before the data stage, not after it: with HF_HUB_OFFLINE set, or with no answer from
    the Hub (the probe is replaced: this machine has no network either way)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", switch)
    monkeypatch.setattr(model_checks, "hub_reachable", lambda: False)
    hub_id = "polymnesia-test/no-such-model"
    err = one_error_line(capsys, "run", QUICKSTART, f"model.name_or_path={hub_id}", "--dry-run")
    why = "HF_HUB_OFFLINE is set" if switch == "1" else "the Hugging Face Hub does not answer"
    assert f"model.name_or_path: '{hub_id}' is a Hub id with nothing in the local" in err
    assert why in err and "huggingface-cli download" in err


def test_a_cached_or_reachable_hub_model_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = load_config(QUICKSTART, ["model.name_or_path=polymnesia-test/no-such-model"])
    specs = build_specs(EXPERIMENTS.get(cfg.experiment), cfg, QUICKSTART)
    names = {s.name for s in specs}
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ConfigError, match="nothing in the local Hugging Face cache"):
        model_checks.check_hub_models(cfg, specs, names, QUICKSTART)
    model_checks.check_hub_models(cfg, specs, set(), QUICKSTART)  # every stage reused
    monkeypatch.setattr(model_checks, "in_hub_cache", lambda name: True)
    model_checks.check_hub_models(cfg, specs, names, QUICKSTART)
    monkeypatch.setattr(model_checks, "in_hub_cache", lambda name: False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(model_checks, "hub_reachable", lambda: True)
    model_checks.check_hub_models(cfg, specs, names, QUICKSTART)

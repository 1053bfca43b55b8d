"""Keys renamed by the one-section-per-concept change: an older config still loads, with one
warning line naming the old and the new key, and gives the same stage fingerprints; a config
that gives both names is one line."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from polymnesia.config.base import renamed
from polymnesia.errors import ConfigError, ConfigWarning
from polymnesia.experiments import EXPERIMENTS, load_config
from polymnesia.stages.finetune import FinetuneEvalConfig

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _fingerprints(cfg: Any) -> dict[str, str]:
    fps: dict[str, str] = {}
    for spec in EXPERIMENTS.get(cfg.experiment).build(cfg):
        fps[spec.name] = spec.fingerprint(fps)
    return fps


def test_renamed_moves_a_key_with_one_warning_naming_both() -> None:
    data = {"a": 1, "sec": {"x": 2}}
    with pytest.warns(ConfigWarning, match=r"^top\.sec\.x is now top\.new\.y; the old name"):
        out = renamed(data, {"sec.x": "new.y"}, "top")
    assert out == {"a": 1, "sec": {}, "new": {"y": 2}}
    assert data == {"a": 1, "sec": {"x": 2}}  # the caller's mapping is left alone
    with pytest.raises(ValueError, match=r"^top\.a is the old name of top\.b; give only top\.b"):
        renamed({"a": 1, "b": 2}, {"a": "b"}, "top")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert renamed({"b": 1}, {"a": "b"}, "top") == {"b": 1}  # nothing old: no warning


@pytest.mark.parametrize(
    ("old", "new"),
    [("max_eval_per_lang", "max_texts_per_lang"), ("max_eval_per_target", "max_texts_per_target")],
)
def test_lf_mlf_evaluation_limits_renamed(old: str, new: str) -> None:
    with pytest.warns(ConfigWarning, match=rf"evaluate\.{old} is now evaluate\.{new}"):
        assert getattr(FinetuneEvalConfig(**{old: 7}), new) == 7
    with pytest.raises(ValidationError, match=f"give only evaluate.{new}"):
        FinetuneEvalConfig(**{old: 7, new: 7})


def _old_config(
    tmp_path: Path, name: str, *replacements: tuple[str, str], match: str | None = None
) -> Any:
    """``configs/NAME`` with ``replacements`` (new text -> old text), loaded: it warns
    (``match``: the warning's text)."""
    text = (CONFIGS / name).read_text(encoding="utf-8")
    for new, old in replacements:
        assert new in text, new
        text = text.replace(new, old)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.warns(ConfigWarning, match=match):
        return load_config(path)


def test_renamed_limits_keep_the_fine_tuning_fingerprints(tmp_path: Path) -> None:
    smoke = CONFIGS / "lf_mlf_smoke.yaml"
    new = load_config(smoke)
    old = _old_config(
        tmp_path,
        "lf_mlf_smoke.yaml",
        ("evaluate: {", "evaluation: {"),
        ("max_texts_per_lang: 16", "max_eval_per_lang: 16"),
    )
    assert old.evaluate == new.evaluate
    assert _fingerprints(old) == _fingerprints(new)
    # the renamed key enters the fingerprint: another value, another entry
    other = load_config(smoke, ["evaluate.max_texts_per_lang=17"])
    assert _fingerprints(other) != _fingerprints(new)


@pytest.mark.parametrize(
    ("old", "new", "value"),
    [
        ("eval_batch_size", "batch_size", 32),
        ("eval_precision", "precision", "bf16"),
    ],
)
def test_lifelong_flat_eval_keys_are_the_evaluate_section(old: str, new: str, value: Any) -> None:
    smoke = CONFIGS / "lifelong_smoke.yaml"
    with pytest.warns(ConfigWarning, match=rf"^{old} is now evaluate\.{new}; the old name"):
        cfg = load_config(smoke, [f"{old}={value}"])
    assert getattr(cfg.evaluate, new) == value


def test_an_old_and_a_new_name_together_are_one_line() -> None:
    with pytest.raises(ConfigError) as e:
        load_config(CONFIGS / "lifelong_smoke.yaml", ["eval_per_lang=12"])
    msg = str(e.value)
    assert "eval_per_lang is the old name of evaluate.max_texts_per_lang" in msg
    assert "\n" not in msg


def test_lifelong_old_eval_keys_keep_the_fingerprints(tmp_path: Path) -> None:
    new = load_config(CONFIGS / "lifelong_smoke.yaml")
    old = _old_config(
        tmp_path, "lifelong_smoke.yaml", ("evaluate: {max_texts_per_lang: 16}", "eval_per_lang: 16")
    )
    assert old.evaluate == new.evaluate
    assert _fingerprints(old) == _fingerprints(new)


def test_active_forgetting_harness_is_in_the_evaluate_section() -> None:
    smoke = CONFIGS / "active_forgetting_smoke.yaml"
    harness = "{tasks: [poly_genre_en], limit: 4, num_fewshot: 0, batch_size: 2}"
    with pytest.warns(ConfigWarning, match=r"^harness is now evaluate\.harness; the old name"):
        old = load_config(smoke, [f"harness={harness}"])
    new = load_config(smoke, [f"evaluate.harness={harness}"])
    assert old.evaluate == new.evaluate and new.evaluate.harness.limit == 4
    assert _fingerprints(old) == _fingerprints(new)


TWO_PHASE_NEW = """evaluate:
  ea_margin: 0.05
  harness:
    english: [poly_genre_en, poly_quote_en, poly_reference_en]
    multilingual: [poly_continue_mc_fr, poly_translate_de, poly_reference_fr]
    limit: 8
    docs_per_task: 8
    num_fewshot: 0
    max_gen_toks: 8
"""
#: the same section before: flat, lm-eval keys beside ea_margin, num_fewshot 0 by default
TWO_PHASE_OLD = """evaluation:
  english: [poly_genre_en, poly_quote_en, poly_reference_en]
  multilingual: [poly_continue_mc_fr, poly_translate_de, poly_reference_fr]
  limit: 8
  docs_per_task: 8
  max_gen_toks: 8
  ea_margin: 0.05
"""


def test_two_phase_flat_evaluation_is_evaluate_with_a_harness_section(tmp_path: Path) -> None:
    new = load_config(CONFIGS / "two_phase_smoke.yaml")
    warning = r"^evaluation is now evaluate, with its lm-eval keys"
    old = _old_config(
        tmp_path, "two_phase_smoke.yaml", (TWO_PHASE_NEW, TWO_PHASE_OLD), match=warning
    )
    assert old.evaluate == new.evaluate
    assert _fingerprints(old) == _fingerprints(new)
    # the old section's own defaults still apply to an old config that leaves them out
    with pytest.warns(ConfigWarning):
        cfg = load_config(tmp_path / "two_phase_smoke.yaml", ["evaluation.limit=null"])
    h = cfg.evaluate.harness
    assert (h.limit, h.num_fewshot, h.max_gen_toks) == (None, 0, 8)
    with pytest.raises(ConfigError, match="evaluation is the old name of evaluate; give only"):
        load_config(CONFIGS / "two_phase_smoke.yaml", ["evaluation.limit=4"])


LIFELONG_NEW = """train:
  full: {lr: 1.0e-3, batch_size: 16, early_stopping: {max_epochs: 2, patience: 1}}
  lora: {lr: 3.0e-3, batch_size: 16, early_stopping: {max_epochs: 2, patience: 1}}
"""
#: the same settings before they were training presets: flat sections of their own
LIFELONG_OLD = """full: {lr: 1.0e-3, batch_size: 16, early_stopping: {max_epochs: 2, patience: 1}}
lora_hyper: {lr: 3.0e-3, batch_size: 16, early_stopping: {max_epochs: 2, patience: 1}}
"""


def test_lifelong_optimisation_sections_are_train_presets(tmp_path: Path) -> None:
    new = load_config(CONFIGS / "lifelong_smoke.yaml")
    text = (CONFIGS / "lifelong_smoke.yaml").read_text(encoding="utf-8")
    assert LIFELONG_NEW in text
    path = tmp_path / "lifelong_smoke.yaml"
    path.write_text(text.replace(LIFELONG_NEW, LIFELONG_OLD), encoding="utf-8")
    with pytest.warns(ConfigWarning) as caught:
        old = load_config(path)
    assert sorted(str(w.message) for w in caught) == [
        "full is now train.full; the old name is still read",
        "lora_hyper is now train.lora; the old name is still read",
    ]
    assert old.train == new.train
    assert _fingerprints(old) == _fingerprints(new)
    arm = "ewc: {lr: 1.0e-3, early_stopping: {max_epochs: 2, patience: 1}}"
    with pytest.warns(ConfigWarning, match=r"^overrides is now train\.overrides; the old name"):
        cfg = load_config(
            CONFIGS / "lifelong_smoke.yaml", ["methods=[vanilla,ewc]", f"overrides={{{arm}}}"]
        )
    assert cfg.train.overrides["ewc"].lr == 1e-3
    with pytest.raises(ConfigError, match="full is the old name of train.full; give only"):
        load_config(CONFIGS / "lifelong_smoke.yaml", ["full.lr=0.1"])

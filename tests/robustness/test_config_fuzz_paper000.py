"""The fuzzer's protocol-level findings for Aggarwal et al. 2024's configs, now refused in one line.

The seeded fuzzer (fuzz_configs.py) marks empty lists, upper-case codes and the like as
"any" because whether they make sense depends on the protocol. For active_forgetting and
language_modeling they are decided here: each mutation below, built the fuzzer's way and
run through the same CLI path, must be refused with the named reason (or, for an
upper-case language code, accepted and normalised).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fuzz_configs import CONFIGS, Mutation, _dump, _set, run_one

from polymnesia.config.loader import parse_yaml

PAPER000 = [
    "active_forgetting.yaml",
    "active_forgetting_smoke.yaml",
    "active_forgetting_scale.yaml",
]

#: (config, key path, value, text the refusal must hold)
REFUSALS = [
    *[(c, "instruct.tasks", [], "instruct.tasks") for c in PAPER000],
    *[
        (c, "instruct.tasks", ["genre", "bogus"], "unknown instruction task 'bogus'")
        for c in PAPER000
    ],
    ("active_forgetting_scale.yaml", "sizes", [], "sizes is empty"),
    ("active_forgetting_scale.yaml", "sizes", [""], "unknown model preset '' in sizes"),
    ("active_forgetting_scale.yaml", "sizes", ["bogus"], "in sizes"),
    *[(c, "groups.adapting", [], "groups.adapting is empty") for c in PAPER000],
    *[(c, "groups.pretraining", [], "at least one pretraining language") for c in PAPER000],
    ("quickstart.yaml", "groups.pretraining", [], "at least one pretraining language"),
    ("active_forgetting.yaml", "groups.other", ["de", "de"], "listed twice in groups.other"),
    ("quickstart.yaml", "groups.other", ["de", "DE"], "listed twice in groups.other"),
    ("active_forgetting.yaml", "groups.other", ["en"], "in both 'pretraining' and 'other'"),
    ("active_forgetting.yaml", "groups.other", ["EN"], "in both 'pretraining' and 'other'"),
    ("active_forgetting_smoke.yaml", "downstream.bleu_tokenize", "bogus", "unknown BLEU tokenizer"),
    (
        "active_forgetting.yaml",
        "harness",
        {"tasks": ["mmlu"], "offline": True},
        "need the Hugging Face Hub",
    ),
]


def _mutate(config: str, path: str, value: object) -> Mutation:
    data = parse_yaml((CONFIGS / config).read_text("utf-8"))
    return Mutation(config, "paper000", path, "refuse", _dump(_set(data, path.split("."), value)))


@pytest.mark.parametrize(("config", "path", "value", "needle"), REFUSALS)
def test_protocol_nonsense_is_refused(  # type: ignore[no-untyped-def]
    isolated_cache, tmp_path: Path, config: str, path: str, value: object, needle: str
) -> None:
    for dry_run in (False, True):
        out = run_one(_mutate(config, path, value), tmp_path, dry_run=dry_run)
        assert out.result == "refused" and needle in out.detail, (dry_run, out)


def test_upper_case_codes_are_accepted_as_the_table_code(isolated_cache, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from polymnesia.experiments.loading import load_config

    m = _mutate("quickstart.yaml", "groups.adapting", ["JA", "FR", "pt", "tr", "ko", "pl"])
    assert run_one(m, tmp_path, dry_run=False).result == "accepted"
    cfg = load_config(tmp_path / "quickstart.yaml")
    assert cfg.groups.adapting[:2] == ["ja", "fr"]

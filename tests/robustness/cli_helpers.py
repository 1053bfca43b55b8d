"""Calling the command line as a user does, in this process: its one-line refusals, and
configs written with changes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from polymnesia.cli.main import main

#: the quickstart on two UDHR languages
SMALL = ["data.source=udhr", "groups.pretraining=[en,fr]", "groups.adapting=[]", "groups.other=[]"]
#: ... cut to seconds: a 300-token BPE, two steps, a few texts
TINY_RUN = [
    *SMALL,
    "train.steps=2",
    "train.batch_size=2",
    "tokenizer.vocab_size=300",
    "tokenizer.sample_texts=100",
    "data.max_train_per_lang=60",
    "data.max_eval_per_lang=10",
    "evaluate.max_texts_per_lang=5",
]


def refused(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    """``main(argv)`` exits 2 with one ``polymnesia: error:`` line, the last of its standard
    error (after any warning lines of the stages that ran), which is returned."""
    capsys.readouterr()
    assert main(argv) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    errors = [line for line in lines if line.startswith("polymnesia: error:")]
    assert errors == lines[-1:] and not any("Traceback" in line for line in lines), lines
    return errors[0]


def config_with(
    tmp_path: Path, base: Path | str, text_after: str = "", /, **changes: object
) -> str:
    """``base`` with its top-level keys ``changes`` replaced and ``text_after`` appended, as
    ``tmp_path/config.yaml``."""
    data = yaml.safe_load(Path(base).read_text(encoding="utf-8"))
    data.update(changes)
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False) + text_after, encoding="utf-8")
    return str(path)

"""What the command line writes when its output goes to a file rather than a terminal."""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
from pathlib import Path

import pytest

from polymnesia.cli.output import PROGRESS_BAR_SWITCHES, plain_library_output


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def switches(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROGRESS_BAR_SWITCHES:  # set first, so that the original state is restored
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)


@pytest.mark.usefixtures("switches")
def test_library_progress_bars_off_in_a_file_and_left_alone_on_a_terminal() -> None:
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    try:
        hf_logging.enable_progress_bar()
        assert not plain_library_output(Terminal())
        assert all(name not in os.environ for name in PROGRESS_BAR_SWITCHES)
        assert hf_logging.is_progress_bar_enabled()
        assert plain_library_output(io.StringIO())
        assert all(os.environ[name] == "1" for name in PROGRESS_BAR_SWITCHES)
        assert not hf_logging.is_progress_bar_enabled()
    finally:
        (hf_logging.enable_progress_bar if was else hf_logging.disable_progress_bar)()


@pytest.mark.usefixtures("switches")
def test_a_switch_the_user_set_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    monkeypatch.setenv(PROGRESS_BAR_SWITCHES[0], "0")
    try:
        hf_logging.enable_progress_bar()
        plain_library_output(io.StringIO())
        assert os.environ[PROGRESS_BAR_SWITCHES[0]] == "0"
        assert hf_logging.is_progress_bar_enabled()
    finally:
        (hf_logging.enable_progress_bar if was else hf_logging.disable_progress_bar)()


def test_polymnesia_log_records_are_prefixed_lines_while_a_command_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import polymnesia.cli.main as cli

    def command(args: object) -> int:
        logging.getLogger("polymnesia.stages.instruct").warning("left out %d of %d", 2, 24)
        logging.getLogger("polymnesia.stages.instruct").info("not shown")
        return 0

    monkeypatch.setattr(cli, "parse_args", lambda p, argv: argparse.Namespace(fn=command))
    assert cli.main(["ls"]) == 0
    assert capsys.readouterr().err == "[polymnesia] warning: left out 2 of 24\n"
    assert not logging.getLogger("polymnesia").handlers  # removed when the command ends


def test_run_summary_counts_what_this_run_built_and_reused(tmp_path: Path) -> None:
    from polymnesia.experiments.run_driver import run_summary

    stages = {"a": "reuse", "b": "run", "c": "resume", "d": "run"}
    record = {"stages": {k: {"status": v} for k, v in stages.items()}}
    (tmp_path / "run.json").write_text(json.dumps(record), encoding="utf-8")
    assert run_summary(tmp_path, 75.2) == (
        "4 stages in 1 min 15 s: 3 built (1 resumed), 1 reused from the cache"
    )
    record["stages"] = {"a": {"status": "reuse"}}
    (tmp_path / "run.json").write_text(json.dumps(record), encoding="utf-8")
    assert run_summary(tmp_path, 3) == "1 stage in 3 s: 0 built, 1 reused from the cache"

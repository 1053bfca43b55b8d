"""What the command line writes when its output goes to a file rather than a terminal."""

from __future__ import annotations

import io
import os

import pytest

from polymnesia.cli.main import PROGRESS_BAR_SWITCHES, plain_library_output


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

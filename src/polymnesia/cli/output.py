"""What the command line writes besides its results: log lines that say whose they are,
and no progress-bar debris when the output is a file (a run's closing summary is
:func:`polymnesia.experiments.run_driver.run_summary`).

The library (:mod:`polymnesia.runtime` loads torch) is imported inside the functions, so
``polymnesia --help`` and argument errors answer without loading it."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

PROGRESS_BAR_SWITCHES = ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS")


def plain_library_output(stream: Any = None) -> bool:
    """Output going to a file: the Hugging Face libraries' progress bars (weights loaded and
    written, datasets mapped) off, as polymnesia's own progress turns to lines. A switch the
    user set is left alone. True when the bars were turned off."""
    from polymnesia.runtime import is_terminal

    if is_terminal(stream):
        return False
    for name in PROGRESS_BAR_SWITCHES:
        os.environ.setdefault(name, "1")
    if "transformers" in sys.modules and os.environ[PROGRESS_BAR_SWITCHES[0]] != "0":
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    return True


class PolymnesiaLogLines(logging.Handler):
    """polymnesia's own log records (``logging.getLogger("polymnesia.…")``) as
    ``[polymnesia] warning: ...`` lines on the standard error of the moment (they reached
    Python's last-resort handler bare, with nothing saying whose they were)."""

    def emit(self, record: logging.LogRecord) -> None:
        from polymnesia.runtime import say

        level = "" if record.levelno < logging.WARNING else f"{record.levelname.lower()}: "
        try:
            say(f"{level}{record.getMessage()}")
        except Exception:  # noqa: BLE001  (logging must not end the run)
            self.handleError(record)

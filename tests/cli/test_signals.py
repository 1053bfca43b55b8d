"""SIGTERM unwinds a command as Ctrl-C does, unless another handler owns it."""

from __future__ import annotations

import os
import signal
import time

import pytest

from polymnesia.cli.main import Terminated, sigterm_as_interrupt


def test_sigterm_raises_terminated_inside_the_block_and_is_restored() -> None:
    before = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        with pytest.raises(Terminated), sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # (the handler raises long before this returns)
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    finally:
        signal.signal(signal.SIGTERM, before)


def test_another_handler_is_left_alone() -> None:
    seen: list[int] = []
    before = signal.signal(signal.SIGTERM, lambda signum, frame: seen.append(signum))
    try:
        with sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGTERM)
        assert seen == [signal.SIGTERM]  # (submitit's own handler in a SLURM job, say)
    finally:
        signal.signal(signal.SIGTERM, before)

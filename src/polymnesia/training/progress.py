"""Training progress for a person: a bar on a terminal, a few plain lines in a log file.

A tqdm bar redraws itself with carriage returns; written to a file (``nohup``, a batch
scheduler's log, CI) it leaves one unreadable line of hundreds of kilobytes. When the
stream is not a terminal, :class:`ProgressLines` writes one line each time training
crosses another tenth of its steps (read at the loop's log steps) and one at the end::

    [polymnesia] pretrain: step 300/1500 (20%), loss 5.280, 8497 tokens/s, 35 s, ~2 min 21 s left
"""

from __future__ import annotations

import sys
import time
from typing import Any, Protocol, TextIO

from polymnesia.runtime import is_terminal

TENTHS = 10


class Progress(Protocol):
    def update(self, n: int) -> None: ...

    def show(self, loss: float, tokens_per_s: float) -> None: ...

    def close(self) -> None: ...


def open_progress(total: int, initial: int, desc: str, stream: TextIO | None = None) -> Progress:
    """A tqdm bar when ``stream`` (default stderr) is a terminal, else :class:`ProgressLines`."""
    out = sys.stderr if stream is None else stream
    if is_terminal(out):
        return _Bar(total, initial, desc, out)
    return ProgressLines(total, initial, desc, out)


class _Bar:
    def __init__(self, total: int, initial: int, desc: str, stream: TextIO) -> None:
        from tqdm.auto import tqdm

        self.bar: Any = tqdm(
            total=total, initial=initial, desc=desc, mininterval=1.0, leave=False, file=stream
        )

    def update(self, n: int) -> None:
        self.bar.update(n)

    def show(self, loss: float, tokens_per_s: float) -> None:
        self.bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tokens_per_s:.0f}")

    def close(self) -> None:
        self.bar.close()


class ProgressLines:
    """One line per tenth of the steps crossed (at most 10 lines, and one at the end)."""

    def __init__(
        self,
        total: int,
        initial: int,
        desc: str,
        stream: TextIO,
        clock: Any = time.monotonic,
    ) -> None:
        self.total, self.step, self.desc, self.stream = max(1, total), initial, desc, stream
        self.clock, self.start, self.first = clock, clock(), initial
        self.shown = self._tenth(initial)
        self.last: tuple[float, float] | None = None
        if initial:
            self._write(f"{self.desc}: resumed at step {initial}/{self.total}")

    def _tenth(self, step: int) -> int:
        return step * TENTHS // self.total

    def update(self, n: int) -> None:
        self.step += n

    def show(self, loss: float, tokens_per_s: float) -> None:
        self.last = (loss, tokens_per_s)
        if self._tenth(self.step) > self.shown and self.step < self.total:
            self.shown = self._tenth(self.step)
            self._line()

    def close(self) -> None:
        if self.step > self.first:
            self._line(final=True)

    def _line(self, final: bool = False) -> None:
        elapsed = self.clock() - self.start
        parts = [f"step {self.step}/{self.total} ({100 * self.step // self.total}%)"]
        if self.last is not None:
            parts += [f"loss {self.last[0]:.3f}", f"{self.last[1]:.0f} tokens/s"]
        parts.append(duration(elapsed))
        done = self.step - self.first
        if not final and done > 0:  # (show() speaks only before the last step)
            parts.append(f"~{duration(elapsed / done * (self.total - self.step))} left")
        self._write(f"{self.desc}: " + ", ".join(parts))

    def _write(self, text: str) -> None:
        print(f"[polymnesia] {text}", file=self.stream, flush=True)


def duration(seconds: float) -> str:
    """``42 s``, ``2 min 21 s``, ``1 h 05 min``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"

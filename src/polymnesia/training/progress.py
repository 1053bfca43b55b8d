"""Training progress for a person: a bar on a terminal, a few plain lines in a log file.

A tqdm bar redraws itself with carriage returns; written to a file (``nohup``, a batch
scheduler's log, CI) it leaves one unreadable line of hundreds of kilobytes. When the
stream is not a terminal, :class:`ProgressLines` writes one line each time training
crosses another tenth of its steps (read at the loop's log steps) and one at the end::

    [polymnesia] pretrain: step 300/1500 (20%), loss 5.280, 8497 tokens/s, 35 s, ~2 min 21 s left

On a terminal the bar is erased when its stage ends, and the final line is written in its
place, so every stage leaves its steps, last loss, validation bits per byte (where it
measured them) and time on screen.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Protocol, TextIO

from polymnesia.runtime import is_terminal

TENTHS = 10


class Progress(Protocol):
    def update(self, n: int) -> None: ...

    def show(self, loss: float, tokens_per_s: float, val_bpb: float | None = None) -> None: ...

    def close(self) -> None: ...


def open_progress(total: int, initial: int, desc: str, stream: TextIO | None = None) -> Progress:
    """A tqdm bar when ``stream`` (default stderr) is a terminal, else :class:`ProgressLines`."""
    out = sys.stderr if stream is None else stream
    if is_terminal(out):
        return _Bar(total, initial, desc, out)
    return ProgressLines(total, initial, desc, out)


class _Bar:
    """A tqdm bar that leaves its stage's lines on screen: "resumed at step N" above it, and
    when it closes, the final line (steps, last loss, validation bits per byte, time), the
    same as :class:`ProgressLines` writes to a file."""

    def __init__(self, total: int, initial: int, desc: str, stream: TextIO) -> None:
        from tqdm.auto import tqdm

        self.lines = ProgressLines(total, initial, desc, stream)  # says "resumed" now
        self.bar: Any = tqdm(
            total=total, initial=initial, desc=desc, mininterval=1.0, leave=False, file=stream
        )

    def update(self, n: int) -> None:
        self.bar.update(n)
        self.lines.step += n

    def show(self, loss: float, tokens_per_s: float, val_bpb: float | None = None) -> None:
        post = {"loss": f"{loss:.3f}", "tok_s": f"{tokens_per_s:.0f}"}
        if val_bpb is not None:
            post["val_bpb"] = f"{val_bpb:.3f}"
        self.bar.set_postfix(post)
        self.lines.last = (loss, tokens_per_s)
        if val_bpb is not None:
            self.lines.val = val_bpb

    def close(self) -> None:
        self.bar.close()
        self.lines.close()  # the final line stays after the bar is erased


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
        self.val: float | None = None
        if initial:
            self._write(f"{self.desc}: resumed at step {initial}/{self.total}")

    def _tenth(self, step: int) -> int:
        return step * TENTHS // self.total

    def update(self, n: int) -> None:
        self.step += n

    def show(self, loss: float, tokens_per_s: float, val_bpb: float | None = None) -> None:
        self.last = (loss, tokens_per_s)
        if val_bpb is not None:
            self.val = val_bpb
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
        if self.val is not None:
            parts.append(f"validation {self.val:.3f} bits/byte")
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

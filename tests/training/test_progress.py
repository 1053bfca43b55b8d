"""Progress output: a bar on a terminal, one plain line per tenth of the steps in a file."""

from __future__ import annotations

import io

from polymnesia.training.progress import ProgressLines, _Bar, duration, open_progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_open_progress_draws_a_bar_only_on_a_terminal() -> None:
    assert isinstance(open_progress(10, 0, "x", Terminal()), _Bar)
    assert isinstance(open_progress(10, 0, "x", io.StringIO()), ProgressLines)


def test_lines_at_each_tenth_crossed_and_at_the_end() -> None:
    out, clock = io.StringIO(), Clock()
    p = ProgressLines(200, 0, "pretrain", out, clock=clock)
    for step in range(1, 201):
        p.update(1)
        clock.now += 0.5
        if step % 15 == 0 or step == 200:  # the loop's log steps
            p.show(loss=5.0 - step / 100, tokens_per_s=1000.0)
    p.close()
    lines = out.getvalue().splitlines()
    assert "\r" not in out.getvalue()
    # log steps 30, 45, 60, ...: the first log step past each tenth (20, 40, ...) speaks
    steps = [int(x.split("step ")[1].split("/")[0]) for x in lines]
    assert steps == [30, 45, 60, 90, 105, 120, 150, 165, 180, 200]
    assert lines[0] == (
        "[polymnesia] pretrain: step 30/200 (15%), loss 4.700, 1000 tokens/s, 15 s, ~1 min 25 s "
        "left"
    )
    assert (
        lines[-1]
        == "[polymnesia] pretrain: step 200/200 (100%), loss 3.000, 1000 tokens/s, 1 min 40 s"
    )


def test_resumed_run_says_where_it_starts_and_nothing_when_nothing_ran() -> None:
    out = io.StringIO()
    p = ProgressLines(100, 50, "ft", out, clock=Clock())
    p.close()
    assert out.getvalue() == "[polymnesia] ft: resumed at step 50/100\n"


def test_duration() -> None:
    assert [duration(s) for s in (0, 42.4, 61, 3599, 3600, 7500)] == [
        "0 s",
        "42 s",
        "1 min 1 s",
        "59 min 59 s",
        "1 h 00 min",
        "2 h 05 min",
    ]


def test_a_terminal_bar_leaves_its_final_line_and_says_where_it_resumed() -> None:
    """Issue 42: the erased bar left nothing on screen; now the stage's last line stays (with
    the validation bits per byte where the stage measured it), and a resume says so."""
    out = Terminal()
    bar = open_progress(100, 40, "pretrain", out)
    for _ in range(60):
        bar.update(1)
    bar.show(3.25, 900.0, 1.234)
    bar.close()
    lines = [x for x in out.getvalue().replace("\r", "\n").splitlines() if "[polymnesia]" in x]
    assert lines[0] == "[polymnesia] pretrain: resumed at step 40/100"
    assert lines[-1].startswith(
        "[polymnesia] pretrain: step 100/100 (100%), loss 3.250, 900 tokens/s, "
        "validation 1.234 bits/byte, "
    )


def test_file_lines_carry_the_validation_bits_per_byte() -> None:
    out, clock = io.StringIO(), Clock()
    p = ProgressLines(10, 0, "pretrain", out, clock=clock)
    p.update(10)
    p.show(2.0, 100.0, val_bpb=1.5)
    p.close()
    assert "validation 1.500 bits/byte" in out.getvalue().splitlines()[-1]

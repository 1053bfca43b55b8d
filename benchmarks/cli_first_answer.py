"""Wall time of the command line's first answers, each a whole process (issue 42, "the first
answers in under 2 s"): ``polymnesia validate configs/quickstart.yaml``, the same with a
typo'd key (``--set modle.preset=tiny``, answered by the config check alone), a missing
config file, ``ls sources`` and ``--help``, with ``python -c pass`` for reference (the
interpreter's own start). Each command runs ``--rounds`` times, alternating; the median and
the range are printed. The machine's load average is printed too: these figures are only
comparable on the same machine under the same load.

    python benchmarks/cli_first_answer.py              # 5 rounds
    python benchmarks/cli_first_answer.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "--help": ["-m", "polymnesia", "--help"],
    "ls sources": ["-m", "polymnesia", "ls", "sources"],
    "validate missing file": ["-m", "polymnesia", "validate", "configs/no_such.yaml"],
    "validate typo'd key": [
        "-m",
        "polymnesia",
        "validate",
        "configs/quickstart.yaml",
        "--set",
        "modle.preset=tiny",
    ],
    "validate quickstart": ["-m", "polymnesia", "validate", "configs/quickstart.yaml"],
}
#: what each command must answer with (exit status), so a broken command is not timed as fast
EXPECTED = {"validate missing file": 2, "validate typo'd key": 2}
GOAL_S = 2.0


def timed(args: list[str]) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "HF_HUB_OFFLINE": "1"}
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True)
    return time.perf_counter() - start, done.returncode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    load_before = os.getloadavg()[0]
    for _ in range(args.rounds):
        for name, argv in COMMANDS.items():
            seconds, code = timed(argv)
            if code != EXPECTED.get(name, 0):
                raise SystemExit(f"{name}: exit {code}, expected {EXPECTED.get(name, 0)}")
            times[name].append(seconds)
    load_after = os.getloadavg()[0]
    print(
        f"load average (1 min) {load_before:.2f} before, {load_after:.2f} after; "
        f"{os.cpu_count()} CPUs; {args.rounds} rounds"
    )
    for name, ts in times.items():
        med = statistics.median(ts)
        goal = "" if name == "python -c pass" else (" ok" if med <= GOAL_S else " over 2 s")
        print(f"{name:24s} median {med:6.2f} s  [{min(ts):.2f}-{max(ts):.2f}]{goal}")


if __name__ == "__main__":
    main()

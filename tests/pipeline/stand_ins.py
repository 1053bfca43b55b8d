"""Stand-in stages for the executors' tests (local and slurm): plans of a small graph whose
stages a child process "builds" by marking its cache entry complete, with a trace of when
each stage ran, where, and how it failed."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from polymnesia.pipeline.integrity import MARKER


def planned(
    graph: Mapping[str, Sequence[str] | tuple[str, Sequence[str]]],
    root: Path,
    reuse: tuple[str, ...] = (),
) -> list[Any]:
    """Planned stages of ``graph`` (name -> the stages it takes inputs from, or name ->
    (stage kind, those stages)), their entries under ``root/entries``."""
    out = []
    for name, node in graph.items():
        kind, ups = node if isinstance(node, tuple) else (None, node)
        spec = SimpleNamespace(name=name, inputs={f"in{i}": u for i, u in enumerate(ups)})
        if kind is not None:
            spec.kind = kind
        status = "reuse" if name in reuse else "run"
        out.append(SimpleNamespace(spec=spec, status=status, entry=root / "entries" / name))
    return out


def command(
    trace: Path,
    root: Path,
    *,
    sleep: float = 0.0,
    fail: tuple[str, ...] = (),
    fail_once: tuple[str, ...] = (),
    fail_sleep: float = 0.0,
) -> Callable[[list[str]], list[str]]:
    """A child's command: builds its stages one after another, each after ``sleep`` seconds
    (records when it started and ended, its job and threads, marks its entry complete). A
    stage in ``fail`` exits with status 1 every time; one in ``fail_once`` prints "failing",
    waits ``fail_sleep`` seconds and exits with status 3 on its first attempt only."""

    def build(names: list[str]) -> list[str]:
        code = (
            "import json, os, sys, time, pathlib\n"
            f"for name in {names!r}:\n"
            f"    t0 = time.time(); time.sleep({sleep})\n"
            f"    if name in {list(fail)!r}: sys.exit(1)\n"
            f"    flag = pathlib.Path({str(root)!r}) / ('tried-' + name)\n"
            f"    if name in {list(fail_once)!r} and not flag.exists():\n"
            f"        flag.touch(); print('failing', name, flush=True); time.sleep({fail_sleep})\n"
            "        sys.exit(3)\n"
            "    rec = {'name': name, 'start': t0, 'end': time.time(),"
            " 'job': os.environ.get('SLURM_JOB_ID'),"
            " 'threads': os.environ.get('OMP_NUM_THREADS'), 'child': os.getpid()}\n"
            f"    open({str(trace)!r}, 'a').write(json.dumps(rec) + '\\n')\n"
            f"    entry = pathlib.Path({str(root / 'entries')!r}) / name\n"
            f"    entry.mkdir(parents=True); (entry / {MARKER!r}).write_text('{{}}')\n"
            "    print('building', name)\n"
        )
        return [sys.executable, "-c", code]

    return build


def read_trace(path: Path) -> dict[str, dict[str, Any]]:
    """The trace :func:`command` wrote, by stage name."""
    return {r["name"]: r for r in map(json.loads, path.read_text().splitlines())}

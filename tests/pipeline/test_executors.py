"""``--executor local``: independent stages side by side as child processes, each when the
stages it needs are done, a failure holding back only what needs it
(:mod:`polymnesia.pipeline.executors`)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from polymnesia.errors import ConfigError
from polymnesia.pipeline.executors import check_executor, run_local, slots, stage_graph


def _planned(graph: dict[str, list[str]], reuse: tuple[str, ...] = ()) -> list[Any]:
    return [
        SimpleNamespace(
            spec=SimpleNamespace(name=n, inputs={f"in{i}": u for i, u in enumerate(ups)}),
            status="reuse" if n in reuse else "run",
        )
        for n, ups in graph.items()
    ]


def _command(trace: Path, fail: tuple[str, ...] = (), sleep: float = 0.6) -> Any:
    """A child that records when it started and ended (and fails for the names in ``fail``)."""

    def command(name: str) -> list[str]:
        code = (
            "import json, sys, time, os\n"
            f"t0 = time.time(); time.sleep({sleep})\n"
            f"rec = {{'name': {name!r}, 'start': t0, 'end': time.time(),"
            " 'threads': os.environ.get('OMP_NUM_THREADS')}\n"
            f"open({str(trace)!r}, 'a').write(json.dumps(rec) + '\\n')\n"
            f"print('building {name}')\n"
            f"sys.exit({1 if name in fail else 0})\n"
        )
        return [sys.executable, "-c", code]

    return command


def _trace(path: Path) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in map(json.loads, path.read_text().splitlines())}


GRAPH = {"data": [], "base": ["data"], "a0": ["base"], "a1": ["a0"], "b0": ["base"], "b1": ["b0"]}


def test_independent_stages_run_side_by_side_after_what_they_need(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    res = run_local(
        _planned(GRAPH), _command(trace), tmp_path / "logs", 2, log=lambda m: None, env=env, cpus=4
    )
    assert res.ok and sorted(res.built) == sorted(GRAPH) and not res.held_back
    t = _trace(trace)
    for stage, needs in GRAPH.items():  # a stage starts after every stage it needs ended
        assert all(t[stage]["start"] >= t[up]["end"] for up in needs), stage
    # the two chains after "base" overlap in time, two at once
    assert t["a0"]["start"] < t["b0"]["end"] and t["b0"]["start"] < t["a0"]["end"]
    assert {r["threads"] for r in t.values()} == {"2"}  # 4 CPU threads shared by 2 slots
    assert (tmp_path / "logs" / "a1.log").read_text().strip() == "building a1"


def test_a_failed_stage_holds_back_only_what_needs_it(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    lines: list[str] = []
    res = run_local(
        _planned(GRAPH), _command(trace, fail=("a0",)), tmp_path / "logs", 2, log=lines.append
    )
    assert not res.ok and set(res.failed) == {"a0"} and res.held_back == ["a1"]
    assert res.failed["a0"] == tmp_path / "logs" / "a0.log"
    assert set(_trace(trace)) == {"data", "base", "a0", "b0", "b1"}  # chain b ran to its end
    (failed,) = [m for m in lines if m.startswith("[polymnesia] failed ")]
    assert "a0 (exit 1); its log: " in failed and "not started: a1" in failed


def test_reused_stages_are_not_run(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    res = run_local(
        _planned(GRAPH, reuse=("data", "base", "a0")),
        _command(trace, sleep=0),
        tmp_path / "logs",
        3,
        log=lambda m: None,
    )
    assert sorted(res.built) == ["a1", "b0", "b1"] and set(_trace(trace)) == {"a1", "b0", "b1"}


def test_slots_give_a_gpu_each_or_a_share_of_the_threads() -> None:
    assert slots(2, gpus=4, cpus=16) == [
        {"CUDA_VISIBLE_DEVICES": "0"},
        {"CUDA_VISIBLE_DEVICES": "1"},
    ]
    assert slots(3, gpus=0, cpus=2)[0]["OMP_NUM_THREADS"] == "1"  # at least one thread
    assert slots(2, gpus=1, cpus=8)[1] == {"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4"}


def test_stage_graph_is_the_plans_inputs() -> None:
    assert stage_graph(_planned(GRAPH))["a1"] == {"a0"}


@pytest.mark.parametrize(
    ("executor", "jobs", "match"),
    [
        ("slurm2", None, "accepted: inline, local"),
        ("inline", 2, "--jobs needs --executor local"),
        ("local", 0, "accepted: 1 to 256"),
        ("local", 10**30, "accepted: 1 to 256"),
    ],
)
def test_bad_executor_options_get_one_line(executor: str, jobs: int | None, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        check_executor(executor, jobs)


def test_ctrl_c_stops_the_children(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    started = time.monotonic()

    def log(message: str) -> None:
        if "start" in message and time.monotonic() - started > 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_local(_planned(GRAPH), _command(trace, sleep=30), tmp_path / "logs", 2, log=log)
    assert time.monotonic() - started < 20 and not trace.exists()  # killed before writing

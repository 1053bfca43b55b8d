"""``--executor local``: independent stages side by side as child processes, each when the
stages it needs are done, a failure holding back only what needs it
(:mod:`polymnesia.pipeline.executors`)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from stand_ins import command, planned, read_trace

from polymnesia.errors import ConfigError
from polymnesia.pipeline.executors import chain, check_executor, run_local, slots, stage_graph

GRAPH = {"data": [], "base": ["data"], "a0": ["base"], "a1": ["a0"], "b0": ["base"], "b1": ["b0"]}


def test_independent_stages_run_side_by_side_after_what_they_need(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    res = run_local(
        planned(GRAPH, tmp_path),
        command(trace, tmp_path, sleep=0.6),
        tmp_path / "logs",
        2,
        log=lambda m: None,
        env=env,
        cpus=4,
    )
    assert res.ok and sorted(res.built) == sorted(GRAPH) and not res.held_back
    t = read_trace(trace)
    for stage, needs in GRAPH.items():  # a stage starts after every stage it needs ended
        assert all(t[stage]["start"] >= t[up]["end"] for up in needs), stage
    # the two chains after "base" overlap in time, two at once, each chain in one child
    assert t["a0"]["start"] < t["b0"]["end"] and t["b0"]["start"] < t["a0"]["end"]
    assert t["a0"]["child"] == t["a1"]["child"] != t["b0"]["child"] == t["b1"]["child"]
    assert t["data"]["child"] == t["base"]["child"]
    assert {r["threads"] for r in t.values()} == {"2"}  # 4 CPU threads shared by 2 slots
    assert (tmp_path / "logs" / "a0.log").read_text().split() == [
        "building",
        "a0",
        "building",
        "a1",
    ]
    assert res.logs["a1"] == tmp_path / "logs" / "a0.log"


def test_a_failed_stage_holds_back_only_what_needs_it(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    lines: list[str] = []
    res = run_local(
        planned(GRAPH, tmp_path),
        command(trace, tmp_path, sleep=0.6, fail=("a0",)),
        tmp_path / "logs",
        2,
        log=lines.append,
    )
    assert not res.ok and set(res.failed) == {"a0"} and res.held_back == ["a1"]
    assert res.failed["a0"] == tmp_path / "logs" / "a0.log"
    assert set(read_trace(trace)) == {"data", "base", "b0", "b1"}  # chain b ran to its end
    assert sorted(res.built) == ["b0", "b1", "base", "data"]
    (failed,) = [m for m in lines if m.startswith("[polymnesia] failed ")]
    assert (
        "a0 (slot 0, exit 1); its log: " in failed
        or "a0 (slot 1, exit 1); its log: " in failed
        and "not started: a1" in failed
    )


def test_reused_stages_are_not_run(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    res = run_local(
        planned(GRAPH, tmp_path, reuse=("data", "base", "a0")),
        command(trace, tmp_path),
        tmp_path / "logs",
        3,
        log=lambda m: None,
    )
    assert sorted(res.built) == ["a1", "b0", "b1"] and set(read_trace(trace)) == {"a1", "b0", "b1"}


def test_slots_give_a_gpu_each_or_a_share_of_the_threads() -> None:
    assert slots(2, gpus=4, cpus=16) == [
        {"CUDA_VISIBLE_DEVICES": "0"},
        {"CUDA_VISIBLE_DEVICES": "1"},
    ]
    assert slots(3, gpus=0, cpus=2)[0]["OMP_NUM_THREADS"] == "1"  # at least one thread
    assert slots(2, gpus=1, cpus=8)[1] == {"OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4"}


def test_stage_graph_is_the_plans_inputs(tmp_path: Path) -> None:
    assert stage_graph(planned(GRAPH, tmp_path))["a1"] == {"a0"}


def test_a_chain_takes_a_stage_only_its_predecessor_feeds() -> None:
    graph = {n: set(ups) for n, ups in GRAPH.items()}
    assert chain("data", graph, list(GRAPH), set()) == ["data", "base"]
    assert chain("a0", graph, ["a0", "a1", "b0", "b1"], {"data", "base"}) == ["a0", "a1"]
    # a stage with a second input not done yet does not join
    graph["a1"].add("b0")
    assert chain("a0", graph, ["a0", "a1", "b0", "b1"], {"data", "base"}) == ["a0"]


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
        run_local(
            planned(GRAPH, tmp_path),
            command(trace, tmp_path, sleep=30),
            tmp_path / "logs",
            2,
            log=log,
        )
    assert time.monotonic() - started < 20 and not trace.exists()  # killed before writing

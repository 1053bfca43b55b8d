"""The cluster schedule of a stage graph, on graphs small enough to check by hand."""

from __future__ import annotations

import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.pipeline.schedule import Job, critical_path, schedule, sequential_seconds


def test_a_chain_takes_its_sum_and_independent_jobs_share_the_gpus() -> None:
    chain = [Job("a", 10), Job("b", 5, needs=("a",))]
    s = schedule(chain, nodes=1, gpus_per_node=4)
    assert (s.start, s.end, s.makespan) == ({"a": 0, "b": 10}, {"a": 10, "b": 15}, 15)
    pair = [Job("a", 10), Job("b", 10)]
    assert schedule(pair, 1, 2).makespan == 10
    assert schedule(pair, 1, 1).makespan == 20 == sequential_seconds(pair)
    assert schedule(pair, 2, 1).nodes == {"a": (0,), "b": (1,)}


def test_the_critical_path_starts_first() -> None:
    # a (1 s) -> b (10 s) is the long chain; c and d (5 s each) wait for a GPU
    jobs = [Job("c", 5), Job("d", 5), Job("a", 1), Job("b", 10, needs=("a",))]
    assert critical_path(jobs) == {"a": 11, "b": 10, "c": 5, "d": 5}
    s = schedule(jobs, 1, 2)
    assert s.start == {"a": 0, "c": 0, "b": 1, "d": 5}
    assert s.makespan == 11  # c and d first would give 16


def test_a_multi_node_job_takes_whole_nodes_and_a_cpu_job_no_gpu() -> None:
    jobs = [Job("small", 4, gpus=2), Job("big", 10, gpus=16), Job("data", 3, gpus=0)]
    s = schedule(jobs, nodes=3, gpus_per_node=8)
    assert s.nodes["big"] == (0, 1) and s.nodes["small"] == (2,)  # side by side at 0
    assert s.nodes["data"] == () and s.start["data"] == 0
    assert s.makespan == 10
    two = schedule([Job("small", 4, gpus=2), Job("big", 10, gpus=16)], 2, 8)
    assert two.start == {"big": 0, "small": 10}  # the longer job first; nothing fits beside it


def test_best_fit_keeps_a_whole_node_free() -> None:
    jobs = [Job("a", 10, gpus=6), Job("b", 10, gpus=2), Job("c", 10, gpus=8)]
    s = schedule(jobs, nodes=2, gpus_per_node=8)
    assert s.nodes["a"] == s.nodes["b"] == (0,) and s.nodes["c"] == (1,)
    assert s.makespan == 10


@pytest.mark.parametrize(
    ("jobs", "message"),
    [
        ([Job("a", 1, gpus=9)], "stage 'a' needs 9 GPUs; the cluster has 1 x 8"),
        ([Job("a", 1, needs=("z",))], "stage 'a' needs 'z', which is not a stage"),
        ([Job("a", 1, needs=("b",)), Job("b", 1, needs=("a",))], "form a cycle"),
        ([Job("a", 1), Job("a", 2)], "stage 'a' is given twice"),
        ([Job("a", -1)], "must not be negative"),
    ],
)
def test_bad_graphs_are_one_line(jobs: list[Job], message: str) -> None:
    with pytest.raises(PolymnesiaError, match=message):
        schedule(jobs, 1, 8)

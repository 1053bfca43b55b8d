"""``--executor slurm`` (:mod:`polymnesia.pipeline.slurm`): the ``cluster:`` section, batches
of short stages, and stage groups run as real jobs on a one-node SLURM cluster (the
``slurm_cluster`` fixture; skipped in one line where it cannot be started): each submitted
once what it needs is complete, a failure named in one line with its log, a failed or
cancelled job submitted again."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from stand_ins import command, planned, read_trace

from polymnesia.cli import main as cli
from polymnesia.errors import ConfigError
from polymnesia.experiments import load_config
from polymnesia.pipeline.executors import describe_status
from polymnesia.pipeline.integrity import MARKER
from polymnesia.pipeline.run_dir import config_hash
from polymnesia.pipeline.slurm import ClusterConfig, batches, check_slurm, run_slurm

ROOT = Path(__file__).resolve().parents[2]
SMOKE = str(ROOT / "configs" / "lifelong_smoke.yaml")
#: name -> (stage kind, the stages it takes inputs from)
GRAPH: dict[str, tuple[str, list[str]]] = {
    "data": ("prepare_data", []),
    "base": ("pretrain", ["data"]),
    "a0": ("pretrain", ["base"]),
    "a1": ("pretrain", ["a0"]),
    "b0": ("pretrain", ["base"]),
    "eval_a": ("evaluate_lm", ["a1"]),
    "eval_b": ("evaluate_lm", ["b0"]),
    "eval_base": ("evaluate_lm", ["base"]),
    "drift": ("representation_drift", ["base"]),
}


FAST = ClusterConfig(poll_s=0.2, time_min=5)


def test_the_cluster_section_is_checked_and_left_out_of_the_config_hash() -> None:
    plain = load_config(SMOKE, [])
    cfg = load_config(SMOKE, ["cluster.partition=gpu", "cluster.sbatch={mail-type: END}"])
    assert cfg.cluster.partition == "gpu" and cfg.cluster.sbatch == {"mail-type": "END"}
    assert config_hash(cfg) == config_hash(plain)  # same run folder as the inline run
    assert "cluster" not in cfg.model_dump()
    with pytest.raises(ConfigError, match="unknown key 'cluster.partitio'.*accepted: partition"):
        load_config(SMOKE, ["cluster.partitio=gpu"])
    with pytest.raises(ConfigError, match="'output' is set by polymnesia itself"):
        load_config(SMOKE, ["cluster.sbatch={output: x.log}"])
    with pytest.raises(ConfigError, match="cluster.attempts"):
        load_config(SMOKE, ["cluster.attempts=0"])


def test_ready_evaluations_share_a_job_up_to_the_batch_size(tmp_path: Path) -> None:
    plan = planned(GRAPH, tmp_path)
    graph = {n: set(ups) for n, (_, ups) in GRAPH.items()}
    pending = [n for n in GRAPH if n not in ("data", "base", "a0", "a1", "b0")]
    done = {"data", "base", "a0", "a1", "b0"}
    # evaluation and analysis stages whose inputs are done, in pipeline order
    assert batches(plan, 8)("eval_a", graph, pending, done) == [
        "eval_a",
        "eval_b",
        "eval_base",
        "drift",
    ]
    assert batches(plan, 2)("eval_b", graph, pending, done) == ["eval_a", "eval_b"]
    assert batches(plan, 1)("eval_a", graph, pending, done) == ["eval_a"]
    # a training chain takes only the stage that alone needs it (a chain), no other
    # evaluation; an evaluation waiting for a stage is not taken
    assert batches(plan, 8)("a0", graph, ["a0", "a1", *pending], {"data", "base"}) == [
        "a0",
        "a1",
        "eval_a",
    ]
    assert "eval_a" not in batches(plan, 8)("eval_base", graph, pending, done - {"a1"})


def _cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "polymnesia", "run", SMOKE, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )


def test_no_sbatch_is_one_line_before_anything_is_submitted(tmp_path: Path) -> None:
    import os

    env = {**os.environ, "PATH": str(tmp_path / "empty"), "PYTHONPATH": str(ROOT / "src")}
    res = _cli("--executor", "slurm", "--run-dir", str(tmp_path / "run"), env=env)
    assert res.returncode != 0
    lines = [x for x in (res.stdout + res.stderr).splitlines() if x.strip()]
    assert len(lines) == 1 and "no `sbatch` on this machine's PATH" in lines[0], lines
    assert not (tmp_path / "run").exists()


def test_a_partition_that_does_not_exist_is_one_line(slurm_cluster: Any, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"cluster.partition 'gpu' is not a partition.*: debug$"):
        check_slurm(ClusterConfig(partition="gpu"))
    check_slurm(ClusterConfig(partition="debug"))
    res = _cli("cluster.partition=gpu", "--executor", "slurm", "--run-dir", str(tmp_path / "r"))
    lines = [x for x in (res.stdout + res.stderr).splitlines() if x.strip()]
    assert res.returncode != 0 and len(lines) == 1, lines
    assert "is not a partition of this cluster; accepted: debug" in lines[0]
    assert not (tmp_path / "r").exists()
    queue = subprocess.run(["squeue", "-h", "-n", "polymnesia-data"], capture_output=True)
    assert not queue.stdout.strip()  # nothing was submitted


def test_stages_run_as_jobs_once_what_they_need_is_complete(
    slurm_cluster: Any, tmp_path: Path
) -> None:
    trace, lines = tmp_path / "trace.jsonl", list[str]()
    status = tmp_path / "executor.json"
    res = run_slurm(
        planned(GRAPH, tmp_path),
        command(trace, tmp_path),
        tmp_path / "slurm",
        FAST,
        log=lines.append,
        status=status,
    )
    assert res.ok and sorted(res.built) == sorted(GRAPH) and not res.held_back
    t = read_trace(trace)
    for stage, (_, needs) in GRAPH.items():  # after every stage it needs ended
        assert all(t[stage]["start"] >= t[up]["end"] for up in needs), stage
    assert t["a0"]["job"] == t["a1"]["job"] != t["b0"]["job"]  # a chain is one job
    assert t["data"]["job"] == t["base"]["job"]
    # eval_base and drift were ready together when base was done: one job
    assert t["eval_base"]["job"] == t["drift"]["job"]
    assert {r["threads"] for r in t.values()} == {"1"}  # the job's one CPU
    for name, where in res.where.items():
        job = where.removeprefix("job ")
        assert res.logs[name].name == f"{job}_0_log.out" and res.logs[name].is_file()
    assert "building a1" in res.logs["a1"].read_text()
    board = json.loads(status.read_text())["stages"]
    assert {s["state"] for s in board.values()} == {"done"}
    assert board["a1"]["where"] == res.where["a1"] and board["a1"]["attempts"] == 1
    assert any(m.startswith("[polymnesia] submit a0 > a1 > eval_a (job ") for m in lines)
    # polymnesia status: one row per stage in plan order, its job, node, attempts and log
    table = describe_status(status).splitlines()
    assert [r.split()[0] for r in table[1:-1]] == list(GRAPH)
    row = table[1 + list(GRAPH).index("a1")].split()
    assert row[1:4] == ["done", "job", res.where["a1"].split()[1]]
    assert row[4] == socket.gethostname() and row[5] == "1" and row[-1] == str(res.logs["a1"])
    assert table[-1].startswith(f"{len(GRAPH)} stages: {len(GRAPH)} done; status written ")


def test_status_of_a_run_without_an_executor_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["status", str(tmp_path)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no logs/executor.json: it was run inline" in err[0], err


def test_a_failed_job_is_one_line_naming_its_log(slurm_cluster: Any, tmp_path: Path) -> None:
    trace, lines = tmp_path / "trace.jsonl", list[str]()
    res = run_slurm(
        planned(GRAPH, tmp_path),
        command(trace, tmp_path, fail_once=("a0",)),
        tmp_path / "slurm",
        FAST,
        log=lines.append,
    )
    assert set(res.failed) == {"a0"} and res.held_back == ["a1", "eval_a"]
    assert "b0" in res.built and "eval_b" in res.built  # the rest ran to the end
    (failed,) = [m for m in lines if m.startswith("[polymnesia] failed ")]
    log = res.failed["a0"]
    assert f"its log: {log}; not started: a1, eval_a" in failed and ", FAILED)" in failed
    text = log.read_text()
    assert "failing a0" in text and "exited with status 3" in text  # the job's own traceback


def test_a_failed_job_is_submitted_again_and_finishes(slurm_cluster: Any, tmp_path: Path) -> None:
    trace, lines = tmp_path / "trace.jsonl", list[str]()
    res = run_slurm(
        planned(GRAPH, tmp_path),
        command(trace, tmp_path, fail_once=("a1",)),
        tmp_path / "slurm",
        FAST.model_copy(update={"attempts": 2}),
        log=lines.append,
    )
    assert res.ok and sorted(res.built) == sorted(GRAPH)
    assert res.attempts["a0"] == 1 and res.attempts["a1"] == 2  # a0 was complete: not again
    assert any(m.startswith("[polymnesia] retry  a1 > eval_a (job ") for m in lines)
    assert read_trace(trace)["a1"]["job"] != read_trace(trace)["a0"]["job"]


def test_a_cancelled_job_is_submitted_again(slurm_cluster: Any, tmp_path: Path) -> None:
    graph: dict[str, tuple[str, list[str]]] = {"train": ("pretrain", [])}
    trace, lines = tmp_path / "trace.jsonl", list[str]()

    def cancel_when_running(message: str) -> None:
        lines.append(message)
        if message.startswith("[polymnesia] submit train"):
            job = message.split("(job ")[1].split(",")[0]

            def cancel() -> None:
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not (tmp_path / "tried-train").exists():
                    time.sleep(0.1)
                subprocess.run(["scancel", job], check=True)

            threading.Thread(target=cancel, daemon=True).start()

    res = run_slurm(
        planned(graph, tmp_path),
        command(trace, tmp_path, fail_once=("train",), fail_sleep=60),
        tmp_path / "slurm",
        FAST.model_copy(update={"attempts": 2}),
        log=cancel_when_running,
    )
    assert res.ok and res.attempts["train"] == 2
    (failed,) = [m for m in lines if m.startswith("[polymnesia] failed train")]
    assert "CANCELLED" in failed and "starting it again" in failed


#: a driver of ``run_slurm`` in a process of its own (so that it can be killed): the stages of
#: REATTACH, each entry complete on disk counted as reused, as a restarted `polymnesia run` plans
DRIVER = """
import sys
from pathlib import Path
from types import SimpleNamespace
sys.path.insert(0, {tests!r})
from test_slurm import FAST, REATTACH, _slow_command
from polymnesia.pipeline.integrity import MARKER
from polymnesia.pipeline.slurm import run_slurm
root = Path({root!r})
planned = [
    SimpleNamespace(
        spec=SimpleNamespace(name=n, kind=k, inputs={{f"in{{i}}": u for i, u in enumerate(ups)}}),
        status="reuse" if (root / "entries" / n / MARKER).is_file() else "run",
        entry=root / "entries" / n,
    )
    for n, (k, ups) in REATTACH.items()
]
res = run_slurm(planned, _slow_command(root), root / "slurm", FAST,
                log=lambda m: print(m, flush=True), status=root / "executor.json")
print("built", ",".join(sorted(res.built)), "ok", res.ok, flush=True)
"""
#: two independent stages, ``slow`` long enough to kill the driver while its job runs
REATTACH: dict[str, tuple[str, list[str]]] = {
    "slow": ("pretrain", []),
    "quick": ("pretrain", []),
    "after": ("evaluate_lm", ["slow", "quick"]),
}


def _slow_command(root: Path, seconds: float = 45.0) -> Any:
    """A job's command: for each stage, a ``started-NAME`` flag, ``seconds`` asleep for
    ``slow``, a line in ``root/trace.jsonl`` and its entry marked complete."""

    def command(names: list[str]) -> list[str]:
        code = (
            "import json, os, time, pathlib\n"
            f"root = pathlib.Path({str(root)!r})\n"
            f"for name in {names!r}:\n"
            "    (root / ('started-' + name)).touch()\n"
            f"    time.sleep({seconds} if name == 'slow' else 0)\n"
            "    rec = {'name': name, 'job': os.environ.get('SLURM_JOB_ID')}\n"
            "    open(root / 'trace.jsonl', 'a').write(json.dumps(rec) + '\\n')\n"
            "    entry = root / 'entries' / name\n"
            f"    entry.mkdir(parents=True); (entry / {MARKER!r}).write_text('{{}}')\n"
        )
        return [sys.executable, "-c", code]

    return command


def test_a_restarted_driver_waits_on_the_running_job(slurm_cluster: Any, tmp_path: Path) -> None:
    import os
    import signal

    script = DRIVER.format(tests=str(Path(__file__).parent), root=str(tmp_path))
    first = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    deadline = time.monotonic() + 120
    while not (tmp_path / "started-slow").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (tmp_path / "started-slow").exists(), first.communicate(timeout=60)[0]
    time.sleep(1.0)  # the driver has seen the job run and written so in its status file
    os.kill(first.pid, signal.SIGKILL)  # no Ctrl-C handler runs: the job is not cancelled
    before, _ = first.communicate(timeout=60)
    (submitted,) = [m for m in before.splitlines() if m.startswith("[polymnesia] submit slow")]
    job = submitted.split("(job ")[1].split(",")[0]
    queue = subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], capture_output=True, text=True)
    assert queue.stdout.strip() == "RUNNING"  # it outlived its driver

    again = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    out = again.stdout + again.stderr
    # the attached job's stage counts as built by this driver; quick was complete: reused
    assert again.returncode == 0 and "built after,slow ok True" in out, out
    assert f"[polymnesia] attach slow (job {job}, submitted by an earlier driver" in out, out
    assert "[polymnesia] submit slow" not in out and "[polymnesia] submit after" in out, out
    # each stage built once, and one job submitted for each: none twice
    trace = [json.loads(x) for x in (tmp_path / "trace.jsonl").read_text().splitlines()]
    assert sorted(r["name"] for r in trace) == sorted(REATTACH)
    assert next(r["job"] for r in trace if r["name"] == "slow") == job
    for name in ("slow", "after"):
        assert len(list((tmp_path / "slurm" / name).glob("*_submitted.pkl"))) == 1, name
    board = json.loads((tmp_path / "executor.json").read_text())["stages"]
    assert {b["state"] for b in board.values()} <= {"done", "reused"}
    assert board["slow"]["where"] == f"job {job}" and board["slow"]["attempts"] == 1

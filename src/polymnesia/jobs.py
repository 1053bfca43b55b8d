"""What a SLURM job of ``--executor slurm`` runs (:func:`run_stage_job`), in a module that
imports nothing heavy: submitit's job process unpickles the function by reference, and
torch is then imported once, by the stages themselves, after the job's thread count is set
(:mod:`polymnesia.pipeline.slurm`)."""

from __future__ import annotations

import os
import runpy
import shlex
import socket
import subprocess
import sys

from polymnesia.errors import PolymnesiaError


def run_stage_job(argv: list[str], processes_per_node: int = 1) -> None:
    """Run ``argv`` in this job: ``OMP_NUM_THREADS`` set to the job's CPUs unless the
    driver's environment set it, then ``python -m polymnesia ...`` in this process (one
    Python start-up per job), any other command as a child process. A job of several
    processes (``processes_per_node`` above 1, or several nodes) runs the command under
    ``torchrun`` instead (:func:`torchrun_command`), one launcher per node. Its output goes to
    the job's log; a non-zero exit fails the job (submitit records it)."""
    cpus = os.environ.get("SLURM_CPUS_PER_TASK")
    if cpus and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = cpus
    job = os.environ.get("SLURM_JOB_ID", "?")
    nodes = int(os.environ.get("SLURM_NNODES", "1") or 1)
    if processes_per_node > 1 or nodes > 1:
        argv = torchrun_command(argv, processes_per_node, nodes)
    print(f"[polymnesia] job {job} on {socket.gethostname()}: {shlex.join(argv)}", flush=True)
    if argv[1:3] == ["-m", "polymnesia"] and os.path.realpath(argv[0]) == os.path.realpath(
        sys.executable
    ):
        saved = sys.argv
        sys.argv = ["polymnesia", *argv[3:]]
        try:
            runpy.run_module("polymnesia", run_name="__main__", alter_sys=True)
            code: object = 0
        except SystemExit as e:
            code = e.code
        finally:
            sys.argv = saved
            sys.stdout.flush()
            sys.stderr.flush()
        code = 0 if code is None else code
    else:
        code = subprocess.call(argv, stdin=subprocess.DEVNULL)
    if code:
        raise PolymnesiaError(f"job {job}: {shlex.join(argv[1:])} exited with status {code}")


def torchrun_command(argv: list[str], processes_per_node: int, nodes: int) -> list[str]:
    """``argv`` (``python -m polymnesia ...``) under ``torchrun`` in a job of ``nodes`` nodes
    (this task one of them, ``SLURM_NODEID``) with ``processes_per_node`` processes each: the
    first node of the job (``SLURM_JOB_NODELIST``, through ``scontrol show hostnames``) is the
    rendezvous, on a port derived from the job id, so two jobs on one node do not meet."""
    if argv[1:3] != ["-m", "polymnesia"]:
        raise PolymnesiaError(
            f"a job of several processes runs `python -m polymnesia ...`, not {shlex.join(argv)}"
        )
    job = os.environ.get("SLURM_JOB_ID", "0")
    port = 20000 + int(job) % 20000 if job.isdigit() else 29500
    rank = os.environ.get("SLURM_NODEID", "0")
    launcher = [argv[0], "-m", "torch.distributed.run", f"--nproc_per_node={processes_per_node}"]
    if nodes > 1:
        host = first_host(os.environ.get("SLURM_JOB_NODELIST", ""))
        launcher += [
            f"--nnodes={nodes}",
            f"--node_rank={rank}",
            f"--master_addr={host}",
            f"--master_port={port}",
        ]
    else:
        launcher += ["--nnodes=1", "--master_addr=127.0.0.1", f"--master_port={port}"]
    return [*launcher, "-m", "polymnesia", *argv[3:]]


def first_host(nodelist: str) -> str:
    """The first host name of a SLURM node list (``node[01-04]`` -> ``node01``), expanded by
    ``scontrol show hostnames``; the list itself when it names one host."""
    if not nodelist:
        raise PolymnesiaError("a job of several nodes needs SLURM_JOB_NODELIST (set by SLURM)")
    if not any(c in nodelist for c in "[],"):
        return nodelist
    out = subprocess.run(
        ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=False
    )
    hosts = out.stdout.split()
    if out.returncode or not hosts:
        raise PolymnesiaError(
            f"scontrol show hostnames {nodelist} failed: {(out.stderr or '').strip() or 'no host'}"
        )
    return hosts[0]

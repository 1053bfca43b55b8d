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


def run_stage_job(argv: list[str]) -> None:
    """Run ``argv`` in this job: ``OMP_NUM_THREADS`` set to the job's CPUs unless the
    driver's environment set it, then ``python -m polymnesia ...`` in this process (one
    Python start-up per job), any other command as a child process. Its output goes to the
    job's log; a non-zero exit fails the job (submitit records it)."""
    cpus = os.environ.get("SLURM_CPUS_PER_TASK")
    if cpus and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = cpus
    job = os.environ.get("SLURM_JOB_ID", "?")
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

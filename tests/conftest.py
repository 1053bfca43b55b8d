"""Shared fixtures: an isolated cache per test session and tiny tokenizers/models."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh POLYMNESIA_CACHE for tests that must not see other runs' stages.

    The Bible download is shared: its data folder is linked from the user's cache.
    """
    from polymnesia.paths import cache_dir

    real = cache_dir()
    cache = tmp_path / "cache"
    (cache / "data").mkdir(parents=True)
    if (real / "data" / "bible").exists():
        (cache / "data" / "bible").symlink_to(real / "data" / "bible")
    monkeypatch.setenv("POLYMNESIA_CACHE", str(cache))
    return cache


@pytest.fixture(scope="session")
def make_tok_model():  # type: ignore[no-untyped-def]
    """Factory: a tiny BPE trained on ``sentences`` and a 16-wide, 1-layer Mistral (seed 0) for
    it.
    """

    def make(sentences: list[str]):  # type: ignore[no-untyped-def]
        from polymnesia.testing import tiny_bpe, tiny_model

        tok = tiny_bpe(sentences, 300, repeat=30)
        return tok, tiny_model("mistral", len(tok), pad_token_id=tok.pad_token_id)

    return make


class SlurmCluster:
    """A one-node SLURM cluster on this machine (:func:`slurm_cluster`): its folder, its
    ``slurm.conf`` and its one partition."""

    def __init__(self, root: Path, conf: Path, partition: str) -> None:
        self.root, self.conf, self.partition = root, conf, partition


def _free_ports(n: int) -> list[int]:
    import socket

    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _start_slurm(root: Path) -> tuple[SlurmCluster | None, str]:
    """Munge, slurmctld and slurmd on localhost from Debian's packages (``slurm-wlm``,
    ``munge``), their state, sockets and logs under ``root``; the cluster, or None and one
    line saying why not."""
    import shutil
    import socket
    import subprocess
    import time

    missing = [c for c in ("munged", "slurmctld", "slurmd", "sbatch") if not shutil.which(c)]
    if missing:
        return None, f"no {missing[0]} (apt-get install slurm-wlm munge)"
    if os.geteuid() != 0:
        return None, "starting slurmctld and slurmd on this machine needs root"
    try:
        __import__("submitit")
    except ImportError:
        return None, "submitit is not installed (pip install 'polymnesia[cluster]')"
    for sub in ("state", "spool"):
        (root / sub).mkdir(parents=True)
    key = root / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    sock = root / "munge.sock"
    started = subprocess.run(
        ["munged", "-f", f"--key-file={key}", f"--socket={sock}", f"--pid-file={root}/munged.pid",
         f"--log-file={root}/munged.log", f"--seed-file={root}/munged.seed"],
        capture_output=True, text=True,
    )  # fmt: skip
    if started.returncode:
        return None, f"munged did not start: {(started.stderr or started.stdout).strip()[:200]}"
    node = socket.gethostname().split(".")[0]
    cpus = os.cpu_count() or 1
    with open("/proc/meminfo") as f:
        total_mb = int(f.readline().split()[1]) // 1024
    memory = int(total_mb * 0.8)
    ctld, slurmd = _free_ports(2)
    conf = root / "slurm.conf"
    conf.write_text(
        f"""ClusterName=polymnesia-test
SlurmctldHost={node}
SlurmctldPort={ctld}
SlurmdPort={slurmd}
AuthType=auth/munge
AuthInfo=socket={sock}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd.pid
SlurmctldLogFile={root}/slurmctld.log
SlurmdLogFile={root}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
MinJobAge=3600
DefMemPerCPU={memory // cpus}
NodeName={node} CPUs={cpus} RealMemory={memory} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
    )
    env = {**os.environ, "SLURM_CONF": str(conf)}
    for daemon in (["slurmctld", "-i"], ["slurmd"]):
        out = subprocess.run(daemon, env=env, capture_output=True, text=True)
        if out.returncode:
            _stop_slurm(root)
            return None, f"{daemon[0]} did not start: {(out.stderr or out.stdout).strip()[:200]}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        out = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True)
        if out.stdout.strip() == "idle":
            return SlurmCluster(root, conf, "debug"), ""
        time.sleep(0.2)
    _stop_slurm(root)
    return None, f"the node did not come up in 30 s (see {root}/slurmd.log)"


def _stop_slurm(root: Path) -> None:
    """Cancel the cluster's jobs, stop the daemons :func:`_start_slurm` started (by their pid
    files), then end what is left of its jobs: the processes whose environment names this
    cluster's ``slurm.conf`` (a job step whose daemon is gone never ends by itself)."""
    import signal
    import subprocess
    import time

    conf = root / "slurm.conf"
    env = {**os.environ, "SLURM_CONF": str(conf)}
    if (root / "slurmctld.pid").is_file():
        subprocess.run(["scancel", "--partition", "debug"], env=env, capture_output=True)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            queue = subprocess.run(["squeue", "-h"], env=env, capture_output=True, text=True)
            if queue.returncode or not queue.stdout.strip():
                break
            time.sleep(0.2)
    pids = []
    for name in ("slurmd", "slurmctld", "munged"):
        pid_file = root / f"{name}.pid"
        if pid_file.is_file():
            pid = int(pid_file.read_text().split()[0])
            try:
                os.kill(pid, signal.SIGTERM)
                pids.append(pid)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + 10
    for pid in pids:
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
    mine = f"SLURM_CONF={conf}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) in (os.getpid(), os.getppid()):
            continue
        try:
            if mine in (proc / "environ").read_bytes().split(b"\0"):
                os.kill(int(proc.name), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    """A one-node SLURM cluster for the session (``SLURM_CONF`` set to it while it runs);
    the test is skipped in one line saying why when it cannot be started."""
    root = tmp_path_factory.mktemp("slurm")
    cluster, why = _start_slurm(root)
    if cluster is None:
        pytest.skip(f"no SLURM cluster for this test: {why}")
    old = os.environ.get("SLURM_CONF")
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        yield cluster
    finally:
        _stop_slurm(root)
        if old is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = old

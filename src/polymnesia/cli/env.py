"""``polymnesia env``: what this machine gives polymnesia, and a short check on its device.

The report (text, or ``--json`` for a bug report) lists polymnesia's packages with
their versions (required ones and each extra's, read from the installed package's
metadata), the torch build and its accelerators, the device, process rank and count
the runtime gives a stage, the stage cache and its free disk, Accelerate's config
file and the environment variables polymnesia or its libraries read.

``--check`` then runs, in this process and with ``--precision``: a matrix product
(the device's measured peak, as the benchmarks measure it), three steps of the
training loop on a tiny random Llama (Accelerate, the precision's autocast, the
fused optimizer where the device has one, the chunked loss), and the likelihood
scorer on the same model placed as the evaluation stages place it. Each says ok or
FAILED with its one-line reason; the exit status is 1 when one failed or a required
package is missing. On a GPU box without internet this is the first thing to run
before an hour-long config.

Under N processes (``torchrun --nproc_per_node N -m polymnesia env --check``, or
``accelerate launch``) every process runs the checks (the training check then trains
under DDP), ``--check`` adds a collective check (an all-reduce whose sum is verified,
its bus bandwidth, and that no two processes share one accelerator), and only the
first process prints: its own report and a line per process. Every process exits 1
when any of them failed.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    pass

#: environment variables that change what polymnesia or the libraries under it do
KNOBS = (
    "POLYMNESIA_CACHE",
    "POLYMNESIA_LOCK_TIMEOUT",
    "POLYMNESIA_ENGINE",
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "CUDA_VISIBLE_DEVICES",
    "ACCELERATE_CONFIG_FILE",
    "ACCELERATE_MIXED_PRECISION",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "TOKENIZERS_PARALLELISM",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "LD_PRELOAD",
    "WANDB_MODE",
    "MLFLOW_TRACKING_URI",
)
#: extras that are for polymnesia's own development, not for running it
DEV_EXTRAS = {"test", "docs"}


def add_parser(sub: Any) -> None:
    e = sub.add_parser(
        "env",
        help="what this machine gives polymnesia (packages, device, cache); --check runs a "
        "short training and scoring check on the device",
    )
    e.add_argument(
        "--check",
        action="store_true",
        help="also run a matrix product, 3 training steps and a scoring pass on the device",
    )
    e.add_argument(
        "--precision",
        choices=["no", "fp16", "bf16"],
        default="no",
        help="precision of --check's training and scoring (default: no, float32)",
    )
    e.add_argument("--json", action="store_true", help="print the report as JSON")
    e.set_defaults(fn=cmd_env)


def packages() -> list[dict[str, Any]]:
    """polymnesia's requirements (its own metadata, development extras left out): name,
    specifier, ``extra`` (None: required), installed ``version`` (None: missing) and ``ok``
    (installed at an accepted version)."""
    from importlib import metadata

    from packaging.requirements import Requirement

    try:
        extras = metadata.metadata("polymnesia").get_all("Provides-Extra") or []
        requires = metadata.requires("polymnesia") or []
    except metadata.PackageNotFoundError:  # a source tree on PYTHONPATH, never installed
        extras, requires = source_requirements()
    out: dict[str, dict[str, Any]] = {}
    for line in requires:
        req = Requirement(line)
        extra = None
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            # an extra's package (or one this Python does not take): which extra takes it
            extra = next((e for e in extras if req.marker.evaluate({"extra": e})), None)
            if extra is None:
                continue
        if extra in DEV_EXTRAS:
            continue
        if req.name in out and out[req.name]["extra"] is None:
            continue  # required already; an extra naming it again adds nothing
        try:
            version: str | None = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            version = None
        ok = version is not None and req.specifier.contains(version, prereleases=True)
        out[req.name] = {
            "name": req.name,
            "wanted": str(req.specifier) or "any",
            "extra": extra,
            "version": version,
            "ok": ok,
        }
    return sorted(out.values(), key=lambda p: (p["extra"] is not None, p["extra"] or "", p["name"]))


def source_requirements() -> tuple[list[str], list[str]]:
    """``(extras, requirement lines)`` from the pyproject.toml of the source tree this
    module was imported from (an uninstalled checkout on PYTHONPATH, as on an offline GPU
    machine), in the form installed metadata gives them; empty where it cannot be read."""
    path = Path(__file__).resolve().parents[3] / "pyproject.toml"
    try:
        import tomllib
    except ImportError:  # Python 3.10
        return [], []
    try:
        project = tomllib.loads(path.read_text(encoding="utf-8")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return [], []
    optional = project.get("optional-dependencies", {})
    lines = list(project.get("dependencies", []))
    for extra, reqs in optional.items():
        for r in reqs:
            req, _, marker = r.partition(";")
            both = f"({marker.strip()}) and " if marker.strip() else ""
            lines.append(f'{req.strip()}; {both}extra == "{extra}"')
    return list(optional), lines


def accelerators() -> list[dict[str, Any]]:
    """The CUDA (or ROCm) devices torch sees: name, memory, compute capability, bf16."""
    import torch

    if not torch.cuda.is_available():
        return []
    out = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        out.append(
            {
                "index": i,
                "name": p.name,
                "memory_gib": round(p.total_memory / 2**30, 1),
                "capability": f"{p.major}.{p.minor}",
            }
        )
    bf16 = bool(torch.cuda.is_bf16_supported())
    for a in out:
        a["bf16"] = bf16
    return out


def accelerate_config() -> dict[str, Any] | None:
    """Accelerate's default config file (what ``accelerate launch`` uses): its path and the
    keys that decide how a run is spread, or None when there is none."""
    try:
        from accelerate.commands.config import default_config_file
    except ImportError:  # pragma: no cover - accelerate is required
        return None
    path = Path(os.environ.get("ACCELERATE_CONFIG_FILE") or default_config_file)
    if not path.is_file():
        return None
    import yaml

    try:
        data = (
            json.loads(path.read_text())
            if path.suffix == ".json"
            else yaml.safe_load(path.read_text())
        )
    except (OSError, ValueError, yaml.YAMLError) as e:
        return {"path": str(path), "error": f"unreadable: {e}".splitlines()[0]}
    keys = ("distributed_type", "num_processes", "mixed_precision", "use_cpu")
    return {"path": str(path), **{k: data.get(k) for k in keys if isinstance(data, dict)}}


def describe() -> dict[str, Any]:
    """Everything ``polymnesia env`` prints, as a dictionary."""
    import torch

    import polymnesia
    from polymnesia.paths import cache_dir
    from polymnesia.runtime import current

    rt = current()
    cache = cache_dir()
    probe = cache if cache.exists() else next((p for p in cache.parents if p.exists()), Path("/"))
    return {
        "polymnesia": polymnesia.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "torch": {
            "version": torch.__version__,
            "cuda": torch.version.cuda,
            "hip": getattr(torch.version, "hip", None),
            "threads": torch.get_num_threads(),
        },
        "accelerators": accelerators(),
        "runtime": {"device": str(rt.device), "rank": rt.rank, "processes": rt.world},
        "accelerate_config": accelerate_config(),
        "cache": {
            "path": str(cache),
            "exists": cache.exists(),
            "free_gib": round(shutil.disk_usage(probe).free / 2**30, 1),
            # corpora fetched into the cache (what an offline run can use without fetching)
            "data": sorted(p.name for p in (cache / "data").iterdir() if p.is_dir())
            if (cache / "data").is_dir()
            else [],
        },
        "packages": packages(),
        "environment": {k: os.environ[k] for k in KNOBS if k in os.environ},
    }


def cmd_env(args: argparse.Namespace) -> int:
    from polymnesia.runtime import current
    from polymnesia.selfcheck import check, gather_processes

    report = describe()
    if args.check:
        report["check"] = {"precision": args.precision, "results": check(args.precision)}
    processes = gather_processes(report)
    if len(processes) > 1:
        report["processes"] = processes
    missing = [p for p in report["packages"] if p["extra"] is None and not p["ok"]]
    failed = [c for p in processes for c in p["check"] if not c["ok"]]
    if current().is_main:
        print(json.dumps(report, indent=2) if args.json else render(report))
    return 1 if missing or failed else 0


def render(report: dict[str, Any]) -> str:
    """The report as text, a section per heading."""
    t = report["torch"]
    build = f"CUDA {t['cuda']}" if t["cuda"] else (f"ROCm {t['hip']}" if t["hip"] else "CPU only")
    lines = [
        f"polymnesia {report['polymnesia']}, Python {report['python']}, {report['platform']}",
        f"CPUs: {report['cpus']}, torch threads: {t['threads']}",
        f"torch {t['version']} ({build})",
    ]
    for a in report["accelerators"] or []:
        lines.append(
            f"  GPU {a['index']}: {a['name']}, {a['memory_gib']} GiB, compute "
            f"{a['capability']}, bf16 {'yes' if a['bf16'] else 'no'}"
        )
    if not report["accelerators"]:
        lines.append("  no GPU visible to torch: every stage runs on the CPU")
    r = report["runtime"]
    lines.append(f"runtime: stages run on {r['device']}, process {r['rank']} of {r['processes']}")
    ac = report["accelerate_config"]
    lines.append(
        "accelerate config: "
        + (
            ", ".join(f"{k} {v}" for k, v in ac.items() if k != "path") + f" ({ac['path']})"
            if ac
            else "none (`accelerate config` writes one)"
        )
    )
    c = report["cache"]
    lines.append(
        f"stage cache: {c['path']} ({'exists' if c['exists'] else 'not created yet'}), "
        f"{c['free_gib']} GiB free; data fetched: {', '.join(c['data']) or 'none'}"
    )
    lines.append("packages:")
    for p in report["packages"]:
        state = (
            p["version"]
            if p["ok"]
            else ("MISSING" if p["version"] is None else f"{p['version']} (too old)")
        )
        if p["extra"] is not None and p["version"] is None:
            state = "not installed"
        lines.append(
            f"  {p['name']:<34} {state:<14} wants {p['wanted']:<16} "
            f"{'required' if p['extra'] is None else 'extra [' + p['extra'] + ']'}"
        )
    env = report["environment"]
    lines.append("environment: " + (", ".join(f"{k}={v}" for k, v in env.items()) or "none set"))
    if "check" in report:
        lines.append(f"check (precision {report['check']['precision']}):")
        for item in report["check"]["results"]:
            mark = "ok    " if item["ok"] else "FAILED"
            lines.append(f"  {mark} {item['name']:<10} {item['seconds']:6.1f} s  {item['detail']}")
    if "processes" in report:
        lines.append(f"processes ({len(report['processes'])}):")
        for p in report["processes"]:
            bad = [c["name"] for c in p["check"] if not c["ok"]]
            state = ("FAILED " + ", ".join(bad)) if bad else ("checks ok" if p["check"] else "")
            lines.append(f"  process {p['rank']}: {p['host']} {p['device']} {state}".rstrip())
    return "\n".join(lines)

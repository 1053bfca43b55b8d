"""Run a pipeline: reuse complete cache entries, resume partial ones, run the rest.

Cache entries live in ``$POLYMNESIA_CACHE/stages/KIND/FINGERPRINT``. An entry
is complete when its ``_complete.json`` marker exists (written last, atomically);
an entry without the marker is a stage that was interrupted: resumable stages
(training) continue from their last checkpoint in it, the others start again.
Under ``accelerate launch`` every process walks the same plan; non-distributed
stages run on the main process while the others wait.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import polymnesia.pipeline.run_dir as rd
from polymnesia.errors import PolymnesiaError
from polymnesia.io import atomic_write_json, file_lock, write_jsonl_atomic
from polymnesia.paths import cache_dir
from polymnesia.pipeline.stage import STAGES, StageContext, StageSpec
from polymnesia.runtime import partial_state

MARKER = "_complete.json"


@dataclass
class PlannedStage:
    spec: StageSpec
    fingerprint: str
    entry: Path
    status: str  # "reuse" | "resume" | "run"


def entry_dir(kind: str, fingerprint: str) -> Path:
    return cache_dir() / "stages" / kind / fingerprint[:24]


def plan(specs: list[StageSpec]) -> list[PlannedStage]:
    """Fingerprint every stage in order and say whether it is reused, resumed or run."""
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise PolymnesiaError(f"pipeline has duplicate stage names: {names}")
    fps: dict[str, str] = {}
    out: list[PlannedStage] = []
    for spec in specs:
        STAGES.get(spec.kind)  # unknown kinds fail here, with suggestions
        for role, up in spec.inputs.items():
            if up not in fps:
                raise PolymnesiaError(
                    f"stage '{spec.name}' input '{role}' refers to unknown or later stage '{up}'"
                )
        fp = spec.fingerprint(fps)
        fps[spec.name] = fp
        entry = entry_dir(spec.kind, fp)
        if (entry / MARKER).exists():
            status = "reuse"
        elif entry.exists() and STAGES.get(spec.kind).resumable:
            status = "resume"
        else:
            status = "run"
        out.append(PlannedStage(spec, fp, entry, status))
    return out


def describe_plan(planned: list[PlannedStage]) -> str:
    lines = []
    for p in planned:
        ins = ", ".join(f"{r}<-{u}" for r, u in p.spec.inputs.items()) or "-"
        lines.append(
            f"  {p.status:6s} {p.spec.name:28s} {p.spec.kind:18s} {p.fingerprint[:12]}  inputs: {ins}"
        )
    return "\n".join(lines)


def _run_one(p: PlannedStage, inputs: dict[str, Path], run_dir: Path | None, is_main: bool) -> None:
    cls = STAGES.get(p.spec.kind)
    if p.status == "run" and is_main and p.entry.exists():
        shutil.rmtree(p.entry)  # a non-resumable stage restarts clean
    if is_main:
        p.entry.mkdir(parents=True, exist_ok=True)
        atomic_write_json(
            p.entry / "spec.json",
            {
                "name": p.spec.name,
                "kind": p.spec.kind,
                "version": cls.version,
                "fingerprint": p.fingerprint,
                "params": json.loads(
                    json.dumps(
                        p.spec.params.model_dump(mode="json")
                        if hasattr(p.spec.params, "model_dump")
                        else p.spec.params
                    )
                ),
            },
        )
    ctx = StageContext(
        spec=p.spec, out_dir=p.entry, inputs=inputs, run_dir=run_dir, is_main_process=is_main
    )
    start = time.time()
    scores = cls().run(ctx)
    if is_main:
        write_jsonl_atomic(p.entry / "scores.jsonl", [asdict(s) for s in scores])
        atomic_write_json(
            p.entry / MARKER,
            {
                "fingerprint": p.fingerprint,
                "seconds": round(time.time() - start, 3),
                "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
            },
        )
        # a complete entry is reused as a whole: its resume checkpoints (optimizer
        # states, often several times the model's size) are no longer needed
        shutil.rmtree(p.entry / "checkpoints", ignore_errors=True)


def run_pipeline(
    specs: list[StageSpec],
    run_dir: Path | None,
    *,
    log: Callable[[str], None] = print,
) -> dict[str, Path]:
    """Execute ``specs`` in order; return stage name -> cache entry folder."""

    state = partial_state()
    is_main = state.is_main_process
    planned = plan(specs)
    entries: dict[str, Path] = {}
    for p in planned:
        inputs = {role: entries[up] for role, up in p.spec.inputs.items()}
        if p.status == "reuse":
            if is_main:
                log(f"[polymnesia] reuse  {p.spec.name} ({p.spec.kind}) from {p.entry}")
        else:
            if is_main:
                log(f"[polymnesia] {p.status:6s} {p.spec.name} ({p.spec.kind})")
            cls = STAGES.get(p.spec.kind)
            if cls.distributed:
                lock = (
                    file_lock(p.entry.with_suffix(".lock"), f"stage cache entry {p.entry}")
                    if is_main
                    else None
                )
                if lock:
                    lock.__enter__()
                try:
                    _run_one(p, inputs, run_dir, is_main)
                finally:
                    if lock:
                        lock.__exit__(None, None, None)
            elif is_main:
                with file_lock(p.entry.with_suffix(".lock"), f"stage cache entry {p.entry}"):
                    _run_one(p, inputs, run_dir, is_main)
            state.wait_for_everyone()
        entries[p.spec.name] = p.entry
        if is_main and run_dir is not None:
            rd.link_stage(run_dir, p.spec.name, p.entry)
            rd.update_run_record(
                run_dir,
                p.spec.name,
                {
                    "kind": p.spec.kind,
                    "fingerprint": p.fingerprint,
                    "status": p.status,
                    "entry": str(p.entry),
                },
            )
            rd.merge_stage_outputs(run_dir, entries)
    return entries

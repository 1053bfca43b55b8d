"""Run a pipeline: reuse complete cache entries, resume partial ones, run the rest.

Cache entries live in ``$POLYMNESIA_CACHE/stages/KIND/FINGERPRINT``. An entry
is complete when its ``_complete.json`` marker exists (written last, atomically,
with a manifest of every file: :mod:`polymnesia.pipeline.integrity`); a complete
entry whose files no longer match the manifest is reported in one line and
rebuilt. An entry is built in a private folder beside it and appears under its
name only complete, by one rename (:mod:`polymnesia.pipeline.builds`); a build
that was interrupted stays in its folder, and the next builder adopts it:
resumable stages (training) continue from their last checkpoint in it, the
others start again. Builders take the entry's lock first
(:mod:`polymnesia.pipeline.entry_lock`: no flock needed; a dead holder's lock is
taken over); a process that needs an entry a live process is building waits
(``lock_timeout`` seconds), then reuses what the other built.
Under ``accelerate launch`` every process walks the same plan; non-distributed
stages run on the main process while the others wait.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch.distributed as dist

import polymnesia.pipeline.builds as builds
import polymnesia.pipeline.integrity as integrity
import polymnesia.pipeline.run_dir as rd
from polymnesia.errors import PolymnesiaError
from polymnesia.io import (
    DEFAULT_LOCK_TIMEOUT,
    atomic_write_json,
    waiting_for_locks,
    write_jsonl_atomic,
)
from polymnesia.paths import cache_dir
from polymnesia.pipeline.cache import record_run_usage
from polymnesia.pipeline.entry_lock import STALE_ENV, EntryLock
from polymnesia.pipeline.integrity import MARKER
from polymnesia.pipeline.stage import CATEGORIES, STAGES, StageContext, StageSpec, check_spec
from polymnesia.results import Score
from polymnesia.runtime import partial_state

if TYPE_CHECKING:
    from accelerate import PartialState

__all__ = [
    "MARKER",
    "CATEGORIES",
    "PlannedStage",
    "check_specs",
    "describe_plan",
    "entry_dir",
    "plan",
    "run_pipeline",
    "select_stages",
]

_STAGE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+=-]*$")


@dataclass
class PlannedStage:
    spec: StageSpec
    fingerprint: str
    entry: Path
    status: str  # "reuse" | "resume" | "run"
    note: str = ""  # why an existing entry is not reused as it is (damaged, unverified)


def entry_dir(kind: str, fingerprint: str) -> Path:
    return cache_dir() / "stages" / kind / fingerprint[:24]


def check_stage_name(name: str) -> str:
    """Stage names become file names in the run folder: letters, digits and ``_.+=-`` only."""
    if not isinstance(name, str) or not _STAGE_NAME.fullmatch(name) or len(name) > 200:
        raise PolymnesiaError(
            f"stage name {name!r} is not a safe file name; stage names (built from branch, "
            "method and language names) may hold letters, digits and _ . + = - only, not / or .."
        )
    return name


def _status(spec: StageSpec, entry: Path) -> tuple[str, str]:
    check = integrity.check_entry(entry)
    if check.state == "ok":
        return "reuse", ""
    if check.state == "unverified":
        return "reuse", "no manifest: hashed on reuse"
    if check.state == "damaged":
        return "run", f"damaged: {check.detail}"
    if STAGES.get(spec.kind).resumable and builds.has_partial(entry):
        return "resume", ""
    return "run", ""


def check_specs(specs: list[StageSpec]) -> None:
    """Hold every spec to its kind's contract (:func:`~polymnesia.pipeline.stage.check_spec`),
    inputs before the stages that use them; one line on the first mismatch."""
    kinds: dict[str, str] = {}
    for spec in specs:
        STAGES.get(spec.kind)  # unknown kinds fail here, with suggestions
        for role, up in spec.inputs.items():
            if up not in kinds:
                raise PolymnesiaError(
                    f"stage '{spec.name}' input '{role}' refers to unknown or later stage '{up}'"
                )
        check_spec(spec, kinds)
        kinds[spec.name] = spec.kind


def plan(specs: list[StageSpec]) -> list[PlannedStage]:
    """Check every stage against its kind's contract, fingerprint it, and say whether it is
    reused, resumed or run."""
    names = [s.name for s in specs]
    if len(set(names)) != len(names):
        raise PolymnesiaError(f"pipeline has duplicate stage names: {names}")
    for spec in specs:
        check_stage_name(spec.name)
    check_specs(specs)  # kinds, parameters and input roles, as each kind declares them
    fps: dict[str, str] = {}
    out: list[PlannedStage] = []
    for spec in specs:
        fp = spec.fingerprint(fps)
        fps[spec.name] = fp
        entry = entry_dir(spec.kind, fp)
        status, note = _status(spec, entry)
        out.append(PlannedStage(spec, fp, entry, status, note))
    return out


def parse_roles(text: str) -> list[str]:
    """``"data,training"`` as a list of stage categories (``Stage.category``); one line naming
    an unknown one."""
    roles = [r.strip() for r in text.split(",") if r.strip()]
    bad = [r for r in roles if r not in CATEGORIES]
    if bad or not roles:
        raise PolymnesiaError(
            f"--only: unknown stage category {', '.join(bad) or repr(text)}; "
            f"give one or more of {', '.join(CATEGORIES)}, separated by commas"
        )
    return roles


def select_stages(
    specs: list[StageSpec], roles: list[str], complete: set[str] | frozenset[str] = frozenset()
) -> tuple[list[StageSpec], list[str]]:
    """The part of a pipeline ``run --only CATEGORIES`` walks, and the stages of those
    categories it skips.

    A stage of one of ``roles`` is run when each of its inputs comes from such a stage
    (itself run) or from a stage in ``complete`` (reused); one that needs any other stage
    (a data stage computed from a trained model, say) is skipped. The list holds the
    chosen stages and the stages they take inputs from, in pipeline order, so
    fingerprints are those of the whole pipeline.
    """
    by_name = {s.name: s for s in specs}
    chosen: set[str] = set()
    skipped: list[str] = []
    for s in specs:  # inputs come before the stages that use them
        if STAGES.get(s.kind).category not in roles:
            continue
        if all(up in chosen or up in complete for up in s.inputs.values()):
            chosen.add(s.name)
        else:
            skipped.append(s.name)
    keep: set[str] = set()
    todo = list(chosen)
    while todo:
        name = todo.pop()
        if name not in keep and name in by_name:
            keep.add(name)
            todo.extend(by_name[name].inputs.values())
    return [s for s in specs if s.name in keep], skipped


def describe_plan(planned: list[PlannedStage]) -> str:
    lines = []
    for p in planned:
        ins = ", ".join(f"{r}<-{u}" for r, u in p.spec.inputs.items()) or "-"
        lines.append(
            f"  {p.status:6s} {p.spec.name:28s} {p.spec.kind:18s} {p.fingerprint[:12]}  inputs: "
            f"{ins}" + (f"  ({p.note})" if p.note else "")
        )
    return "\n".join(lines)


def _write_spec(p: PlannedStage, folder: Path) -> None:
    cls = STAGES.get(p.spec.kind)
    params = p.spec.params
    dumped = params.model_dump(mode="json") if hasattr(params, "model_dump") else params
    atomic_write_json(
        folder / "spec.json",
        {
            "name": p.spec.name,
            "kind": p.spec.kind,
            "version": cls.version,
            "fingerprint": p.fingerprint,
            "params": json.loads(json.dumps(dumped)),
        },
    )


def _run_one(
    p: PlannedStage, build: Path, inputs: dict[str, Path], run_dir: Path | None, is_main: bool
) -> list[Score]:
    """Run the stage with ``build`` (its private build folder) as its output folder."""
    cls = STAGES.get(p.spec.kind)
    if is_main:
        _write_spec(p, build)
    ctx: StageContext[Any] = StageContext(
        spec=p.spec, out_dir=build, inputs=inputs, run_dir=run_dir, is_main_process=is_main
    )
    return cls().run(ctx)


def _complete(p: PlannedStage, build: Path, scores: list[Score], seconds: float) -> None:
    """Finish the build folder: scores, no resume checkpoints, no debris, the marker last."""
    write_jsonl_atomic(build / "scores.jsonl", [asdict(s) for s in scores])
    # a complete entry is reused as a whole: its resume checkpoints (optimizer
    # states, often several times the model's size) are no longer needed
    shutil.rmtree(build / "checkpoints", ignore_errors=True)
    # a kill during an atomic write (the final model save) leaves its temporary folder
    # behind; the resumed stage wrote the artifact again, so the debris goes
    integrity.remove_debris(build)
    integrity.write_marker(
        build,
        {
            "fingerprint": p.fingerprint,
            "seconds": round(seconds, 3),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S"),
        },
    )


def _prepare_reuse(p: PlannedStage, log: Callable[[str], None]) -> None:
    """Say how a reused entry was checked; hash an entry that has no manifest yet."""
    check = integrity.check_entry(p.entry)
    if check.state == "unverified":
        adopted = integrity.adopt_entry(p.entry)
        log(
            f"[polymnesia] {p.spec.name}: cache entry {p.entry} was written without a manifest "
            + (
                "(older polymnesia); its files were hashed now and are checked from here on"
                if adopted
                else "(older polymnesia) and the cache is read-only; reused unverified"
            )
        )
    elif check.refreshed:
        integrity.refresh_marker(p.entry, check)
    dropped = integrity.drop_listed_debris(p.entry)
    if dropped:
        log(
            f"[polymnesia] {p.spec.name}: removed {len(dropped)} temporary file(s) of an "
            f"interrupted write from cache entry {p.entry} (e.g. {dropped[0]})"
        )


def _from_main(state: PartialState, value: tuple[str, str]) -> tuple[str, str]:
    """``value`` as the main process has it, on every process (one under most launches)."""
    if int(getattr(state, "num_processes", 1)) <= 1 or not dist.is_initialized():
        return value
    box: list[Any] = [value]
    dist.broadcast_object_list(box, src=0)
    status, where = box[0]
    return str(status), str(where)


def _build(
    p: PlannedStage,
    inputs: dict[str, Path],
    run_dir: Path | None,
    state: PartialState,
    log: Callable[[str], None],
    lock_timeout: float,
) -> str:
    """Run (or resume) one stage in a private folder under its entry lock, publish it by a
    rename; return the status it ended with."""
    is_main = bool(getattr(state, "is_main_process", True))
    cls = STAGES.get(p.spec.kind)
    name = p.spec.name
    lock = (
        EntryLock(
            p.entry,
            f"stage cache entry {p.entry}",
            timeout=lock_timeout,
            on_wait=lambda m: log(f"[polymnesia] {name}: {m}"),
        )
        if is_main
        else None
    )
    decision = ("", "")
    if lock is not None:
        lock.acquire()
    try:
        if lock is not None:
            if lock.taken_over:
                log(f"[polymnesia] {name}: took over the lock of {p.entry}: {lock.taken_over}")
            # another process may have completed the entry while this one waited
            if integrity.check_entry(p.entry).usable:
                decision = ("reuse", "")
            else:
                build, resumed = builds.prepare(p.entry, lock.generation, resumable=cls.resumable)
                lock.set_build(build.name)
                decision = ("resume" if resumed else "run", str(build))
        status, where = _from_main(state, decision)
        if status == "reuse":
            if is_main:
                log(f"[polymnesia] reuse  {name} ({p.spec.kind}): built by another run")
            return "reuse"
        if is_main:
            if p.note:
                log(f"[polymnesia] {name}: cache entry {p.entry} is {p.note}; rebuilding")
            log(f"[polymnesia] {status:6s} {name} ({p.spec.kind})")
        build = Path(where)
        start = time.time()
        scores: list[Score] = []
        if cls.distributed or is_main:
            scores = _run_one(p, build, inputs, run_dir, is_main)
        state.wait_for_everyone()  # every process is done writing before the folder moves
        if not is_main:
            return status
        if lock is not None and not lock.held():
            # judged dead while it built (frozen longer than the staleness): the new holder
            # may have adopted its folder, so this copy is not published; wait for theirs
            log(
                f"[polymnesia] {name}: {lock.lost} while this run built it (this process "
                f"stood still longer than {STALE_ENV}); its copy is discarded and the other "
                "build waited for"
            )
            lock.release()
            lock = None
            builds.discard(build)
            if int(getattr(state, "num_processes", 1)) > 1:
                raise PolymnesiaError(
                    f"stage {name}: the lock of {p.entry} was taken over while this run built "
                    "it; run the same command again to reuse the other build"
                )
            return _build(p, inputs, run_dir, state, log, lock_timeout)
        _complete(p, build, scores, time.time() - start)
        if not builds.publish(build, p.entry):
            log(
                f"[polymnesia] {name}: another run published {p.entry} first; its entry is "
                "used and this run's copy discarded"
            )
            return "reuse"
        return status
    finally:
        if lock is not None:
            lock.release()


def run_pipeline(
    specs: list[StageSpec],
    run_dir: Path | None,
    *,
    log: Callable[[str], None] = print,
    lock_timeout: float = DEFAULT_LOCK_TIMEOUT,
) -> dict[str, Path]:
    """Execute ``specs`` in order; return stage name -> cache entry folder.

    ``lock_timeout``: seconds to wait for a cache entry another process is building, or for a
    shared download (the Bible) another process is fetching."""
    with waiting_for_locks(lock_timeout):
        return _run_pipeline(specs, run_dir, log, lock_timeout)


def _run_pipeline(
    specs: list[StageSpec], run_dir: Path | None, log: Callable[[str], None], lock_timeout: float
) -> dict[str, Path]:
    state = partial_state()
    is_main = state.is_main_process
    planned = plan(specs)
    entries: dict[str, Path] = {}
    for p in planned:
        inputs = {role: entries[up] for role, up in p.spec.inputs.items()}
        status = p.status
        if status == "reuse":
            if is_main:
                _prepare_reuse(p, log)
                log(f"[polymnesia] reuse  {p.spec.name} ({p.spec.kind}) from {p.entry}")
        else:
            status = _build(p, inputs, run_dir, state, log, lock_timeout)
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
                    "status": status,
                    "entry": str(p.entry),
                    **p.spec.seed_record(),
                },
            )
            rd.merge_stage_outputs(run_dir, entries)
            record_run_usage(run_dir, entries)
    return entries

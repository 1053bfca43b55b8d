"""A run that lost stages for good: the report of the arms that finished.

When a stage of an ``--executor local`` or ``--executor slurm`` run fails for good (every
attempt), the executor holds back the stages that need it and runs the others to the end
(:func:`polymnesia.pipeline.executors.run_graph`). ``polymnesia run`` then writes the run
folder and the report from the stages that completed, without the *arms* the lost stages
belong to. An arm is a model's name in the tables, which its scores carry
(:meth:`polymnesia.pipeline.stage.Stage.arm`: ``EWC``, ``AFA``, ``LF-MLF``); it is reported
whole or not at all, so every number the report shows is one the full run shows too, and no
table mixes a finished arm with half of another.

:func:`partial_plan` says which stages are kept and why each other one is left out; its
record goes to ``run.json`` under ``missing`` (:func:`write_missing`) and the report opens
with a banner line per missing arm (:func:`banner_lines`), naming the stage that failed and
its log. A later run that completes every stage removes the record.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from polymnesia.io import atomic_write_json
from polymnesia.pipeline.stage import STAGES, StageSpec

if TYPE_CHECKING:  # the runner imports torch; reading a record (a report's banner) needs none
    from polymnesia.pipeline.runner import PlannedStage

#: the key of ``run.json`` that holds a partial run's record
KEY = "missing"
#: how many stage names a banner line lists before "and N more"
SHOWN = 6


def arm_of(spec: StageSpec) -> str | None:
    """The arm whose numbers ``spec`` builds or feeds (:meth:`Stage.arm`), None for none."""
    return STAGES.get(spec.kind).arm(spec.params) if spec.kind in STAGES else None


@dataclass
class Partial:
    """Which stages of a plan a partial run keeps (``kept``, in plan order) and, for each
    other one, why not: ``stages[name]`` has its ``state`` (``failed``, ``held back``: not
    started because a stage it needs failed, ``left out``: complete, but its arm is missing
    or it needs a stage that is), its ``arm`` (or None), the failed stages it is missing
    because of (``failed``) and, for a failed stage, its ``log``."""

    kept: list[str]
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    total: int = 0

    @property
    def arms(self) -> list[str]:
        """The missing arms, in plan order."""
        return list(dict.fromkeys(s["arm"] for s in self.stages.values() if s["arm"]))

    @property
    def failed(self) -> dict[str, str]:
        """Each failed stage's log."""
        return {n: s["log"] for n, s in self.stages.items() if s["state"] == "failed"}

    def record(self) -> dict[str, Any]:
        """What ``run.json`` keeps under ``missing``."""
        return {
            "total": self.total,
            "arms": self.arms,
            "stages": self.stages,
            "order": list(self.stages),  # the stages in plan order (JSON keys get sorted)
        }


def _upstream(graph: Mapping[str, set[str]], name: str) -> set[str]:
    out: set[str] = set()
    todo = list(graph[name])
    while todo:
        n = todo.pop()
        if n not in out:
            out.add(n)
            todo.extend(graph.get(n, ()))
    return out


def partial_plan(
    planned: Sequence[PlannedStage], failed: Mapping[str, Path], complete: set[str]
) -> Partial:
    """The stages of ``planned`` a report can be built from when the stages in ``failed``
    (name -> log) failed for good and ``complete`` are the stages whose entries are complete:
    every complete stage except those of an arm that lost a stage, and those that need a stage
    left out (repeated until nothing changes: an arm is kept whole or not at all)."""
    order = [p.spec.name for p in planned]
    graph = {p.spec.name: set(p.spec.inputs.values()) for p in planned}
    arm = {p.spec.name: arm_of(p.spec) for p in planned}
    for name in order:  # a stage of no arm that feeds one arm only (its instruction tuning)
        if arm[name] is None:
            fed = {arm[n] for n in order if name in _upstream(graph, n) and arm[n]}
            arm[name] = fed.pop() if len(fed) == 1 else None
    out: dict[str, dict[str, Any]] = {}
    for name in order:
        causes = sorted((_upstream(graph, name) | {name}) & set(failed))
        if name in failed:
            out[name] = {"state": "failed", "log": str(failed[name])}
        elif name not in complete:
            out[name] = {"state": "held back"}
        else:
            continue
        out[name].update(arm=arm[name], failed=causes)
    changed = True
    while changed:
        changed = False
        lost = {s["arm"] for s in out.values() if s["arm"]}
        for name in order:
            if name in out:
                continue
            needs = [n for n in order if n in graph[name] and n in out]
            if arm[name] in lost or needs:
                found = {c for n in needs for c in out[n]["failed"]}
                if arm[name] in lost:
                    found |= {c for s in out.values() if s["arm"] == arm[name] for c in s["failed"]}
                out[name] = {
                    "state": "left out",
                    "arm": arm[name],
                    "failed": sorted(found),
                    "because": f"arm {arm[name]} is missing"
                    if arm[name] in lost
                    else f"it needs {needs[0]}",
                }
                lost |= {arm[name]} if arm[name] else set()
                changed = True
    stages = {n: out[n] for n in order if n in out}
    return Partial([n for n in order if n not in out], stages, len(order))


def write_missing(run_dir: Path, partial: Partial | None) -> None:
    """Record ``partial`` in ``run_dir/run.json`` (None: remove the record: the run is
    whole)."""
    path = run_dir / "run.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    if partial is None and KEY not in data:
        return
    if partial is None:
        del data[KEY]
    else:
        data[KEY] = partial.record()
    atomic_write_json(path, data)


def read_missing(run_dir: Path) -> dict[str, Any] | None:
    """The partial-run record of ``run_dir`` (None for a whole run or no run record)."""
    try:
        data = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    record = data.get(KEY) if isinstance(data, dict) else None
    return record if isinstance(record, dict) and isinstance(record.get("stages"), dict) else None


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    return shown + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def _cause(stages: Mapping[str, Mapping[str, Any]], failed: Sequence[str]) -> str:
    """``stage X failed (log: PATH)`` for each of ``failed``."""
    return "; ".join(f"stage {f} failed (log: {stages[f].get('log', '?')})" for f in failed)


def banner_lines(record: Mapping[str, Any]) -> list[str]:
    """The lines a partial run's report opens with: what is missing, one line per missing
    arm (the stages that failed, with their logs, and the arm's stages not run or left out),
    one for the missing stages of no arm."""
    found: dict[str, dict[str, Any]] = dict(record.get("stages", {}))
    order = [n for n in record.get("order", []) if n in found]
    stages = {n: found[n] for n in [*order, *(n for n in found if n not in order)]}
    if not stages:
        return []
    arms = [a for a in record.get("arms", []) if isinstance(a, str)]
    lines = [
        f"Incomplete run: {len(stages)} of {record.get('total', '?')} stages are missing, so "
        f"{'arm' if len(arms) == 1 else 'arms'} {', '.join(arms) if arms else '(none)'} "
        f"{'is' if len(arms) == 1 else 'are'} left out of this report. Every table, figure and "
        "claim below covers the other arms only; a claim that compares a missing arm is not "
        "testable in this run: it is marked so, or left out where the report builds no claim "
        "without the arm. The finished stages are cached: run the same "
        "command again to retry the rest."
    ]
    for a in arms:
        mine = {n: s for n, s in stages.items() if s.get("arm") == a}
        failed = sorted({f for s in mine.values() for f in s.get("failed", [])})
        rest = [n for n, s in mine.items() if s["state"] != "failed"]
        line = f"Arm {a} is missing: {_cause(stages, failed) or 'its stages did not finish'}"
        if rest:
            line += f"; its stages not run or left out: {_names(rest)}"
        lines.append(line + ".")
    other = {n: s for n, s in stages.items() if not s.get("arm")}
    if other:
        failed = sorted({f for s in other.values() for f in s.get("failed", [])})
        lines.append(
            f"Missing stages of no one arm: {_names(list(other))} "
            f"({_cause(stages, failed) or 'not finished'}); what they build is left out."
        )
    return lines

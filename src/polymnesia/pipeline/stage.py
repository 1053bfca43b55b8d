"""What a stage is: a registered kind, its typed parameters, and its inputs.

A :class:`StageSpec` names one node of an experiment's pipeline: which
registered :class:`Stage` kind runs, with which parameters, reading which
upstream stages' artifacts. Its fingerprint hashes the kind, the kind's
``version``, the parameters and the fingerprints of its inputs, so a stage whose
config and inputs are unchanged is found in the cache and reused. A parameter
that only changes how results are shown (a report's headline metric) is marked
``Field(..., json_schema_extra=NOT_FINGERPRINTED)`` and left out of the hash; an
option added after entries were cached is marked ``FINGERPRINTED_UNLESS_DEFAULT`` and
hashed only when it is set to something other than its default. A parameter
that names a local file or folder (a local corpus, a model folder) is hashed
with a fingerprint of the files it names (:mod:`polymnesia.pipeline.local_inputs`).
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel

from polymnesia.config.base import (
    FINGERPRINTED_UNLESS_DEFAULT,
    NOT_FINGERPRINTED,
    fingerprint_name,
)
from polymnesia.pipeline import local_inputs
from polymnesia.registry import Registry

if TYPE_CHECKING:
    from polymnesia.results import Score


@dataclass
class StageContext:
    """What a running stage sees."""

    spec: StageSpec
    out_dir: Path  # the stage's cache entry; artifacts go here
    inputs: dict[str, Path]  # role -> upstream artifact folder
    run_dir: Path | None = None
    is_main_process: bool = True

    @property
    def params(self) -> Any:
        return self.spec.params

    def input(self, role: str) -> Path:
        return self.inputs[role]


#: what a stage spends its time on (``Stage.role``): the report's compute table groups by it,
#: ``polymnesia run --only`` picks by it
ROLES = ("data", "training", "evaluation", "analysis", "other")


class Stage(ABC):
    """A kind of stage. Subclasses register with ``@STAGES.register(name, description)``.

    ``version`` enters the fingerprint: bump it when a change to the code changes
    what the stage produces, so old cache entries are not reused.
    ``distributed`` stages run on every process (training); the others run on
    the main process while the rest wait. ``resumable`` stages keep their
    partial output (checkpoints) across an interruption; the others restart
    from an empty folder.
    """

    version: ClassVar[str] = "1"
    #: what the stage spends its time on, for the report's compute table: data, training
    #: (fine-tuning stages include scoring their own model), evaluation, analysis or other
    role: ClassVar[str] = "other"
    distributed: ClassVar[bool] = False
    resumable: ClassVar[bool] = False

    @abstractmethod
    def run(self, ctx: StageContext) -> list[Score]:
        """Produce artifacts in ``ctx.out_dir``; return score records (may be empty)."""


STAGES: Registry[type[Stage]] = Registry("stage", "stages", "polymnesia.stages")


def _canonical(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        fields = type(obj).model_fields
        dumped = obj.model_dump(mode="json")
        out = {}
        for name in sorted(dumped):
            f = fields.get(name)
            mark = f.json_schema_extra if f is not None else None
            value = getattr(obj, name, None)
            if mark == NOT_FINGERPRINTED:
                continue
            if (
                f is not None
                and mark == FINGERPRINTED_UNLESS_DEFAULT
                and value == f.get_default(call_default_factory=True)
            ):
                continue
            out[fingerprint_name(mark, name)] = _nested(value, dumped[name])
        return out
    if isinstance(obj, dict):
        return {str(k): _canonical(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, (list, tuple)):
        return [_canonical(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    return obj


def _nested(value: Any, dumped: Any) -> Any:
    """A field's canonical form: sections nested in it (alone, in lists or in dicts) keep
    their own fingerprint marks; everything else is its JSON dump."""
    if isinstance(value, BaseModel):
        return _canonical(value)
    if isinstance(value, (list, tuple)) and isinstance(dumped, list) and len(value) == len(dumped):
        return [_nested(v, d) for v, d in zip(value, dumped, strict=True)]
    if isinstance(value, dict) and isinstance(dumped, dict) and len(value) == len(dumped):
        keys = {str(k): k for k in value}
        if set(keys) == set(dumped):
            return {k: _nested(value[keys[k]], dumped[k]) for k in sorted(dumped)}
    return _canonical(dumped)


@dataclass
class StageSpec:
    """One node of a pipeline."""

    name: str
    kind: str
    params: Any
    inputs: dict[str, str] = field(default_factory=dict)  # role -> upstream stage name
    label: str = ""  # a human description for --dry-run and the report

    def fingerprint(self, input_fingerprints: dict[str, str]) -> str:
        cls = STAGES.get(self.kind)
        payload = {
            "kind": self.kind,
            "version": cls.version,
            "params": _canonical(self.params),
            "inputs": {role: input_fingerprints[up] for role, up in sorted(self.inputs.items())},
        }
        local = local_inputs.fingerprints(self.params)
        if local:  # only then: stages without local inputs keep their fingerprints
            payload["local_inputs"] = local
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")
        return hashlib.sha256(blob).hexdigest()

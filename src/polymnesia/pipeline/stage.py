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

Each kind declares its contract: its parameter type (``class Pretrain(Stage[PretrainParams])``),
its input roles (:class:`Role`, required or optional, and numbered :class:`Family` roles
``model_0 .. model_N``), and the artifacts it writes (``outputs``). :func:`check_spec` holds a
spec to that declaration, so ``polymnesia plan``, ``validate`` and ``run --dry-run`` refuse a
mis-built spec in one line before anything trains.
"""

from __future__ import annotations

import hashlib
import json
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, get_args, get_origin

from pydantic import BaseModel

from polymnesia.config.base import (
    FINGERPRINTED_AS_DUMPED,
    FINGERPRINTED_UNLESS_DEFAULT,
    NOT_FINGERPRINTED,
    fingerprint_name,
)
from polymnesia.errors import ConfigError
from polymnesia.pipeline import local_inputs
from polymnesia.registry import Registry

if TYPE_CHECKING:
    from polymnesia.results import Score


P = TypeVar("P", bound=BaseModel)


class Artifact:
    """What a stage writes in its cache entry, as a stage's ``outputs`` and a role's ``reads``
    name it (paths relative to the entry)."""

    MODEL = "model/"  # an HF model folder with its tokenizer (models/io.py)
    TOKENIZER = "tokenizer/"
    SPLITS = "LANG/SPLIT.jsonl"  # prepared data (data/prepared.py)
    RECORDS = "records.jsonl"  # instruction records (an instruction set)
    ORDER = "order.json"  # a language order (sequential_order)
    MATRIX = "matrix.json"  # the accuracy matrix R so far (sequential_step)
    ITEMS = "items.jsonl"  # per-item evidence of the scores (items.py)


class Role(str):
    """An input role: the name a spec's ``inputs`` and the stage's ``ctx.input`` both use, with
    the artifact it reads from its upstream stage and whether every spec must give it."""

    reads: str | None
    required: bool

    def __new__(cls, name: str, reads: str | None = None, *, required: bool = True) -> Role:
        role = super().__new__(cls, name)
        role.reads, role.required = reads, required
        return role

    def optional(self) -> Role:
        """The same role, not required (a kind that reads it only in some settings)."""
        return Role(str(self), self.reads, required=False)


@dataclass(frozen=True)
class Family:
    """Numbered roles ``PREFIX0, PREFIX1, ...`` without gaps (``model_0 .. model_N``)."""

    prefix: str
    reads: str | None = None

    def __call__(self, i: int) -> str:
        return f"{self.prefix}{i}"

    def bind(self, stages: Sequence[str]) -> dict[str, str]:
        """``{PREFIX0: stages[0], PREFIX1: stages[1], ...}`` for a spec's inputs."""
        return {self(i): s for i, s in enumerate(stages)}

    def index(self, role: str) -> int | None:
        m = re.fullmatch(re.escape(self.prefix) + r"(0|[1-9][0-9]*)", role)
        return int(m.group(1)) if m else None

    def members(self, roles: Iterable[str]) -> list[str]:
        """This family's roles among ``roles``, in order."""
        found = [(i, r) for r in roles if (i := self.index(r)) is not None]
        return [r for _, r in sorted(found)]


@dataclass
class StageContext(Generic[P]):
    """What a running stage sees."""

    spec: StageSpec
    out_dir: Path  # the stage's cache entry; artifacts go here
    inputs: dict[str, Path]  # role -> upstream artifact folder
    run_dir: Path | None = None
    is_main_process: bool = True

    @property
    def params(self) -> P:
        return self.spec.params

    def input(self, role: str) -> Path:
        return self.inputs[role]

    def family(self, family: Family) -> list[Path]:
        """The folders of ``family``'s roles, in order."""
        return [self.inputs[r] for r in family.members(self.inputs)]


@dataclass(frozen=True)
class Provenance:
    """What a spec's parameters say of the model its stage writes (a model card's front
    matter): the languages it trains on, the models it starts from (Hub ids or folders) and
    the data sources it reads (:meth:`Stage.provenance`)."""

    languages: tuple[str, ...] = ()
    base_models: tuple[str, ...] = ()
    sources: tuple[tuple[str, dict[str, Any]], ...] = ()  # (source name, its options)


def named_models(*names: str | None) -> tuple[str, ...]:
    """The model names of ``names`` that are set (a :class:`Provenance`'s ``base_models``)."""
    return tuple(n for n in names if n)


#: what a stage spends its time on (``Stage.category``): the report's compute table groups by it,
#: ``polymnesia run --only`` picks by it
CATEGORIES = ("data", "training", "evaluation", "analysis", "other")


class Stage(ABC, Generic[P]):
    """A kind of stage. Subclasses register with ``@STAGES.register(name, description)``.

    The contract: ``class Kind(Stage[KindParams])`` declares the parameter type (``Params``,
    read from the class statement), ``inputs`` the input roles (:class:`Role`, :class:`Family`)
    and ``outputs`` the artifacts it writes (:class:`Artifact`); :meth:`named_inputs` adds the
    roles a spec's parameters name (a plugin's ``before: base``). A kind that declares no
    ``inputs`` (``None``) accepts any.
    ``version`` enters the fingerprint: bump it when a change to the code changes
    what the stage produces, so old cache entries are not reused.
    ``distributed`` stages run on every process (training); the others run on
    the main process while the rest wait. ``resumable`` stages keep their
    partial output (checkpoints) across an interruption; the others restart
    from an empty folder.
    """

    #: the parameter type, from ``Stage[Params]`` in the class statement (None: any)
    Params: ClassVar[type[BaseModel] | None] = None
    inputs: ClassVar[tuple[Role | Family, ...] | None] = None
    outputs: ClassVar[tuple[str, ...]] = ()
    version: ClassVar[str] = "1"
    #: what the stage spends its time on, for the report's compute table: data, training
    #: (fine-tuning stages include scoring their own model), evaluation, analysis or other
    category: ClassVar[str] = "other"
    distributed: ClassVar[bool] = False
    resumable: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in cls.__dict__.get("__orig_bases__", ()):
            if get_origin(base) is Stage:
                (params,) = get_args(base)
                if isinstance(params, type) and issubclass(params, BaseModel):
                    cls.Params = params

    @classmethod
    def named_inputs(cls, params: Any) -> Sequence[str]:
        """Roles ``params`` name, which the spec must give (a training plugin's ``before``)."""
        return []

    @classmethod
    def arm(cls, params: Any) -> str | None:
        """The arm (the model's name in tables, which its scores carry) whose numbers this
        stage builds or feeds, None for a stage of no one arm (data, pretraining, an analysis
        of several models): ``params.label`` where it has one. A run that lost a stage for good
        reports the others without that arm (:mod:`polymnesia.pipeline.partial`)."""
        label = getattr(params, "label", None)
        return label if isinstance(label, str) and label else None

    @classmethod
    def provenance(cls, params: Any) -> Provenance:
        """What ``params`` say of the model this stage writes or the data it prepares, for a
        model card (:mod:`polymnesia.experiments.export`): nothing unless a kind says more."""
        return Provenance()

    @abstractmethod
    def run(self, ctx: StageContext[P]) -> list[Score]:
        """Produce artifacts in ``ctx.out_dir``; return score records (may be empty)."""


STAGES: Registry[type[Stage[Any]]] = Registry("stage", "stages", "polymnesia.stages")


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
            if mark == FINGERPRINTED_AS_DUMPED:
                out[name] = _canonical(dumped[name])
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


@dataclass(init=False)
class StageSpec:
    """One node of a pipeline; its kind's contract (:func:`check_spec`) says what ``params``
    and ``inputs`` must be. ``seeds`` and ``unseeded`` say which training seeds the stage
    serves (set where seeds fan out, :func:`polymnesia.experiments.seeds.fan_out`); they are
    not fingerprinted."""

    name: str
    kind: str
    params: Any
    inputs: dict[str, str]  # role -> upstream stage name
    label: str  # a human description for --dry-run and the report
    #: the training seeds whose pipeline this stage belongs to (several for a stage the seed
    #: does not reach, shared by them; empty: not said), recorded in ``run.json``
    seeds: tuple[int, ...]
    #: the stage's name in one seed's own pipeline (``pretrain`` for ``pretrain.seed1``)
    unseeded: str

    def __init__(
        self,
        name: str,
        kind: str,
        params: Any,
        inputs: Mapping[Role, str] | Mapping[str, str] | None = None,
        label: str = "",
        seeds: Sequence[int] = (),
        unseeded: str = "",
    ) -> None:
        self.name, self.kind, self.params, self.label = name, kind, params, label
        # roles (Role constants or strings) are plain strings from here on (fingerprints)
        self.inputs = {str(role): up for role, up in (inputs or {}).items()}
        # which seeds a stage serves is data about the run, not about what the stage computes:
        # neither enters the fingerprint (the seed a stage computes with is in its params)
        self.seeds, self.unseeded = tuple(seeds), unseeded or name

    def seed_record(self) -> dict[str, Any]:
        """What ``run.json`` records of the stage's seeds (nothing when it says none)."""
        return {"seeds": list(self.seeds), "unseeded": self.unseeded} if self.seeds else {}

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


def _accepted(cls: type[Stage[Any]], named: Iterable[str]) -> str:
    declared = cls.inputs or ()
    names = [f"{d.prefix}0.." if isinstance(d, Family) else str(d) for d in declared]
    names += [n for n in named if n not in names]
    return ", ".join(names) or "none"


def check_spec(spec: StageSpec, kinds: Mapping[str, str] | None = None) -> None:
    """Hold ``spec`` to its kind's contract; one line naming what is wrong and what is accepted.

    ``kinds``: upstream stage name -> kind, to check that each input's stage writes what the
    role reads."""
    cls = STAGES.get(spec.kind)
    where = f"stage '{spec.name}' ({spec.kind})"
    if cls.Params is not None and not isinstance(spec.params, cls.Params):
        got = type(spec.params).__name__
        raise ConfigError(f"{where}: parameters are {got}; {spec.kind} takes {cls.Params.__name__}")
    if cls.inputs is None:
        return
    roles = {str(r): r for r in cls.inputs if isinstance(r, Role)}
    named = {str(r): r if isinstance(r, Role) else Role(r) for r in cls.named_inputs(spec.params)}
    families = [f for f in cls.inputs if isinstance(f, Family)]
    for role in spec.inputs:
        if role in roles or role in named or any(f.index(role) is not None for f in families):
            continue
        raise ConfigError(
            f"{where}: unknown input role '{role}'; {spec.kind} takes {_accepted(cls, named)}"
        )
    required = [r for r, d in roles.items() if d.required] + list(named)
    missing = [r for r in dict.fromkeys(required) if r not in spec.inputs]
    if missing:
        raise ConfigError(
            f"{where}: input role '{missing[0]}' is missing; {spec.kind} takes "
            f"{_accepted(cls, named)}"
        )
    for fam in families:
        members = fam.members(spec.inputs)
        if members != [fam(i) for i in range(len(members))]:
            raise ConfigError(
                f"{where}: inputs {', '.join(members)} leave a gap; number them "
                f"{fam(0)}, {fam(1)}, ... without one"
            )
    if kinds is None:
        return
    for role, up in spec.inputs.items():
        reads = _reads([named.get(role), roles.get(role)], families, role)
        kind = kinds.get(up)
        if reads is None or kind is None:
            continue
        writes = STAGES.get(kind).outputs
        if writes and reads not in writes:
            raise ConfigError(
                f"{where}: input '{role}' is stage '{up}' ({kind}), which writes "
                f"{', '.join(writes)}, not the {reads} that '{role}' reads"
            )


def _reads(declared: list[Role | None], families: list[Family], name: str) -> str | None:
    for role in declared:
        if role is not None and role.reads is not None:
            return role.reads
    for fam in families:
        if fam.index(name) is not None:
            return fam.reads
    return None

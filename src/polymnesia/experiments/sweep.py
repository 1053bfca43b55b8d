"""Sweeps: one config, some of its keys given several values, expanded into one run per point.

``polymnesia sweep CONFIG train.lr=[1e-3,2e-3] seed=[0,1]`` (or a ``grid:`` section in the
config, a mapping of dotted keys to lists of values) is the cartesian product of the lists:
here four points, each the config with one value per swept key, applied as the overrides
``polymnesia run CONFIG train.lr=0.001 seed=0`` would apply (:func:`expand`). A command-line
``key=value`` whose value is not a list is a fixed override of every point; a key given on the
command line replaces its list in the ``grid:`` section. A key whose values are lists is
swept over lists of lists: ``seeds=[[0],[0,1,2]]``.

Every point is validated before anything runs (:func:`load_points`): a key that is not a config
key, an empty list, a value given twice, two keys that overlap (``train`` and ``train.steps``)
and a value that fails validation (naming the point) are each one line.

:func:`merge_plans` joins the points' stage plans into one graph: a stage that several points
share (the same cache entry, e.g. data preparation a swept training key does not reach) is one
node, built once; a stage name that stands for different entries in different points becomes
``NAME.pN`` (N: the first point that has that entry). An executor then runs the joined graph,
so independent stages of different points run side by side.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import types
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from polymnesia.config.loader import apply_overrides, field_at, load_yaml, parse_yaml
from polymnesia.errors import ConfigError
from polymnesia.experiments.base import EXPERIMENT_CONFIGS
from polymnesia.experiments.loading import resolve_config
from polymnesia.pipeline.runner import PlannedStage

#: the config section that lists a sweep's keys and values
SECTION = "grid"
#: the most points a sweep may expand into (each is a run)
MAX_POINTS = 1000
#: the longest run folder name made of a point's values; longer ones are ``pN-HASH``
MAX_LABEL = 120
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+=,-]+")


@dataclass(frozen=True)
class SweepPoint:
    """One run of a sweep: its number (from 1), its value of each swept key, the overrides
    that make it (``key=value``, as ``polymnesia run`` takes them) and its run folder's name."""

    number: int
    values: dict[str, Any]
    overrides: list[str]
    label: str


@dataclass
class Sweep:
    """A sweep of ``config`` (its raw mapping without the ``grid:`` section in ``data``): the
    swept keys with their values, the fixed overrides of every point, and the points."""

    config: str
    data: dict[str, Any]
    values: dict[str, list[Any]]
    fixed: list[str]
    points: list[SweepPoint]
    notes: list[str] = field(default_factory=list)

    def digest(self) -> str:
        """A hash of what the sweep runs (the config's content, the values and the fixed
        overrides): the same sweep, the same default folder."""
        blob = json.dumps(
            {"config": self.data, "sweep": self.values, "fixed": self.fixed},
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def value_text(value: Any) -> str:
    """``value`` as override text that polymnesia's YAML reads back as ``value`` (JSON, which
    is YAML: ``"no"`` stays a text, ``0.001`` a number)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def takes_list(model: Any, key: str) -> bool:
    """Whether the config field at the dotted ``key`` of ``model`` holds a list (``seeds``,
    ``groups.pretraining``, ``methods``); False where the key is not a field."""
    info = field_at(model, tuple(key.split("."))) if model is not None else None
    if info is None:
        return False
    todo, kinds = [info.annotation], set()
    while todo:  # through Optional, unions and Annotated
        ann = todo.pop()
        origin = typing.get_origin(ann)
        kinds.add(origin or ann)
        if origin is typing.Annotated:
            todo.append(typing.get_args(ann)[0])
        elif origin in (typing.Union, types.UnionType):
            todo.extend(typing.get_args(ann))
    return bool(kinds & {list, tuple})


def _experiment_model(data: dict[str, Any]) -> Any:
    name = data.get("experiment")
    return (
        EXPERIMENT_CONFIGS.get(name)
        if isinstance(name, str) and name in EXPERIMENT_CONFIGS
        else None
    )


def parse_arguments(
    items: Sequence[str], model: Any = None
) -> tuple[dict[str, list[Any]], list[str]]:
    """The command line's ``key=[a,b]`` (swept) and ``key=value`` (fixed) items; one line for
    a malformed one or a key given twice. A key whose config field holds a list (``seeds``,
    ``groups.pretraining``; ``model``: the protocol's config class) is fixed by ``key=[a,b]``
    and swept by a list of lists, ``key=[[a,b],[c]]``."""
    swept: dict[str, list[Any]] = {}
    fixed: list[str] = []
    seen: set[str] = set()
    for item in items:
        if "=" not in item:
            raise ConfigError(f"sweep argument '{item}' must look like key.path=[a,b] or key=value")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not [p for p in key.split(".") if p]:
            raise ConfigError(f"sweep argument '{item}' has an empty key")
        if key in seen:
            raise ConfigError(f"sweep key '{key}' is given twice; give each key once")
        seen.add(key)
        try:
            value = parse_yaml(raw) if raw.strip() else ""
        except ConfigError as e:
            raise ConfigError(f"sweep key '{key}': {e}") from None
        except Exception:  # malformed YAML: a plain text, as `run` reads it
            value = raw
        if isinstance(value, list) and (
            not takes_list(model, key) or (value and all(isinstance(v, list) for v in value))
        ):
            swept[key] = value
        else:
            fixed.append(item)
    return swept, fixed


def read_section(data: dict[str, Any], source: str) -> dict[str, list[Any]]:
    """The config's ``grid:`` section (removed from ``data``): dotted key -> list of values."""
    section = data.pop(SECTION, None)
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise ConfigError(
            f"config {source}: '{SECTION}' must be a mapping of keys to lists of values, e.g. "
            "grid: {train.lr: [1.0e-3, 2.0e-3]}"
        )
    out: dict[str, list[Any]] = {}
    for key, values in section.items():
        if not isinstance(values, list):
            raise ConfigError(
                f"config {source}: '{SECTION}.{key}' must be a list of values, e.g. [a, b] "
                f"(got {values!r}; a list-valued key takes a list of lists)"
            )
        out[str(key)] = values
    return out


def _check_values(values: dict[str, list[Any]], fixed: list[str]) -> None:
    keys = list(values)
    for key, vals in values.items():
        if not vals:
            raise ConfigError(
                f"sweep key '{key}' has no values; give at least one, e.g. {key}=[a,b]"
            )
        texts = [value_text(v) for v in vals]
        twice = next((t for i, t in enumerate(texts) if t in texts[:i]), None)
        if twice is not None:
            raise ConfigError(
                f"sweep key '{key}' lists the value {twice} twice; each value gives a point, "
                "list each once"
            )
    for a, b in itertools.permutations(keys, 2):
        if b.startswith(f"{a}."):
            raise ConfigError(
                f"sweep keys '{a}' and '{b}' overlap (one is inside the other); sweep one of them"
            )
    for item in fixed:
        key = item.split("=", 1)[0].strip()
        clash = next((k for k in keys if k == key or k.startswith(f"{key}.")), None)
        if clash is not None or any(key.startswith(f"{k}.") for k in keys):
            raise ConfigError(
                f"override '{item}' sets a swept key ({clash or key}); give the key once, as a "
                "list to sweep it or as one value to fix it"
            )


def _short(value: Any) -> str:
    if isinstance(value, list):
        return "+".join(_short(v) for v in value) or "none"
    if isinstance(value, dict):
        return "+".join(f"{k}-{_short(v)}" for k, v in value.items()) or "none"
    return str(value).lower() if isinstance(value, bool) or value is None else str(value)


def short_keys(keys: Sequence[str]) -> dict[str, str]:
    """Each dotted key's name in a point's label: its last part (``lr`` for ``train.lr``)
    where no two keys share it, else the whole key."""
    last = [k.rsplit(".", 1)[-1] for k in keys]
    unique = len(set(last)) == len(last)
    return {k: (tail if unique else k) for k, tail in zip(keys, last, strict=True)}


def label(values: dict[str, Any], number: int) -> str:
    """A point's run folder name: ``key=value`` of each key (:func:`short_keys`) joined by
    commas, in characters safe in a file name; ``pN-HASH`` when that is longer than
    :data:`MAX_LABEL`."""
    names = short_keys(list(values))
    text = ",".join(f"{names[k]}={_short(v)}" for k, v in values.items())
    text = _UNSAFE.sub("-", text).strip("-.") or f"p{number}"
    if len(text) > MAX_LABEL:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]
        text = f"p{number}-{digest}"
    return text


def expand(config: str | Path, arguments: Sequence[str]) -> Sweep:
    """The points of a sweep of ``config`` (its ``grid:`` section, then the command line's
    ``arguments``), in the cartesian order of the keys (the last key varies fastest). Not yet
    validated against the config (:func:`load_points`)."""
    source = str(config)
    data = load_yaml(config)
    values = read_section(data, source)
    swept, fixed = parse_arguments(arguments, _experiment_model(data))
    values.update(swept)  # the command line's list replaces the section's
    if not values:
        raise ConfigError(
            f"nothing to sweep in {source}: give key=[a,b] on the command line or a "
            f"'{SECTION}:' section of keys and lists of values"
        )
    _check_values(values, fixed)
    count = 1
    for listed in values.values():
        count *= len(listed)
    if count > MAX_POINTS:
        raise ConfigError(
            f"the sweep has {count:,} points (runs); at most {MAX_POINTS:,} are accepted"
        )
    named = [k for k, v in values.items() if len(v) > 1] or list(values)
    points = []
    for i, combo in enumerate(itertools.product(*values.values()), start=1):
        point = dict(zip(values, combo, strict=True))
        overrides = [*fixed, *(f"{k}={value_text(v)}" for k, v in point.items())]
        points.append(SweepPoint(i, point, overrides, label({k: point[k] for k in named}, i)))
    labels = [p.label for p in points]
    if len(set(labels)) != len(labels):  # values that read the same in a file name
        points = [
            SweepPoint(p.number, p.values, p.overrides, f"{p.label}-p{p.number}") for p in points
        ]
    notes = []
    if count == 1:
        notes.append(
            "the sweep has one point: it runs as `polymnesia run` would, and no comparison "
            "table is written (compare needs two runs)"
        )
    return Sweep(source, data, values, fixed, points, notes)


def _where(point: SweepPoint) -> str:
    return f"sweep point {point.number} ({', '.join(point.overrides[-len(point.values) :])})"


def load_point(sweep: Sweep, point: SweepPoint) -> Any:
    """The typed config of one point; one line naming the point (or the key) when it fails."""
    try:
        data = apply_overrides(sweep.data, point.overrides)
        return resolve_config(data, sweep.config)
    except ConfigError as e:
        text = str(e)
        detail = text.removeprefix(f"{sweep.config}: ")
        fixed = {item.split("=", 1)[0].strip(): item for item in sweep.fixed}
        for key in [*point.values, *fixed]:
            parts = key.split(".")
            heads = {".".join(parts[: i + 1]) for i in range(len(parts))}
            if any(f"unknown key '{h}'" in text for h in heads):
                what = f"sweep key '{key}'" if key in point.values else f"override '{fixed[key]}'"
                raise ConfigError(f"{what} is not a config key: {detail}") from None
        raise ConfigError(f"{_where(point)}: {text}") from None


def load_points(sweep: Sweep) -> list[Any]:
    """Every point's typed config, each validated before any runs."""
    return [load_point(sweep, p) for p in sweep.points]


def point_error(point: SweepPoint, error: Exception) -> ConfigError:
    """``error`` (raised building or checking a point's stages) as one line naming the point."""
    return ConfigError(f"{_where(point)}: {error}")


@dataclass
class MergedPlan:
    """The points' stage plans joined (:func:`merge_plans`): one :class:`PlannedStage` per
    distinct cache entry, named ``NAME`` or ``NAME.pN``; each point's stage names to the joined
    ones (``names[i]``, point ``i`` counted from 0), and each joined stage's points."""

    planned: list[PlannedStage]
    names: list[dict[str, str]]
    points: dict[str, list[int]]

    def holder(self, merged: str) -> tuple[int, str]:
        """A point (from 0) that has the joined stage ``merged``, and its name there."""
        i = self.points[merged][0]
        own = next(n for n, m in self.names[i].items() if m == merged)
        return i, own

    def shared(self) -> list[str]:
        """The joined stages that more than one point uses."""
        return [n for n, pts in self.points.items() if len(pts) > 1]


def merge_plans(plans: Sequence[Sequence[PlannedStage]]) -> MergedPlan:
    """One graph from the plans of several points: stages with the same cache entry are one
    node. A stage's inputs come before it in its own plan and a shared stage is placed where
    its first point has it, so the joined list is in an order the graph allows."""
    entries: dict[Path, str] = {}  # cache entry -> joined name
    by_name: dict[str, set[Path]] = {}
    for planned in plans:
        for p in planned:
            by_name.setdefault(p.spec.name, set()).add(p.entry)
    out: list[PlannedStage] = []
    names: list[dict[str, str]] = []
    points: dict[str, list[int]] = {}
    for i, planned in enumerate(plans):
        own: dict[str, str] = {}
        for p in planned:
            merged = entries.get(p.entry)
            if merged is None:
                merged = (
                    p.spec.name if len(by_name[p.spec.name]) == 1 else f"{p.spec.name}.p{i + 1}"
                )
                entries[p.entry] = merged
                inputs = {role: own[up] for role, up in p.spec.inputs.items()}
                spec = replace(p.spec, name=merged, inputs=inputs)  # keeps its seeds
                out.append(PlannedStage(spec, p.fingerprint, p.entry, p.status, p.note))
            own[p.spec.name] = merged
            points.setdefault(merged, []).append(i)
        names.append(own)
    return MergedPlan(out, names, points)

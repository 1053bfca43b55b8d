"""Base class for every typed config section."""

from __future__ import annotations

import copy
import types
import typing
import warnings
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

from polymnesia.errors import ConfigWarning


def _is_number_type(ann: Any) -> bool:
    return ann in (int, float)


def _bool_where_number(value: Any, ann: Any) -> bool:
    """Whether ``value`` holds a bool where ``ann`` wants an int or a float, or a number
    where it wants a bool (at any depth)."""
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is typing.Annotated:
        return _bool_where_number(value, args[0])
    if origin in (typing.Union, types.UnionType):
        if isinstance(value, bool) and bool in args:  # the union accepts bools
            return False
        return any(_bool_where_number(value, a) for a in args if a is not type(None))
    if isinstance(value, bool):
        return _is_number_type(ann)
    if ann is bool and isinstance(value, (int, float)):
        return True  # a number where a boolean is meant (`progress_bar: 0`)
    if origin in (list, tuple, set, frozenset) and isinstance(value, (list, tuple)):
        if origin is tuple and args and args[-1] is not Ellipsis:
            return any(_bool_where_number(v, a) for v, a in zip(value, args, strict=False))
        return bool(args) and any(_bool_where_number(v, args[0]) for v in value)
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        return any(_bool_where_number(v, args[1]) for v in value.values())
    return False


def _too_large(value: Any, ann: Any) -> str | None:
    """``"float"`` when ``value`` holds a number beyond :data:`MAX_FLOAT` where ``ann`` takes a
    float, ``"int"`` when it holds one beyond :data:`MAX_INT` where ``ann`` takes an integer
    (at any depth: ``split_fractions: [0.8, 0.1, 1e39]`` too), else None."""
    origin = typing.get_origin(ann)
    args = typing.get_args(ann)
    if origin is typing.Annotated:
        return _too_large(value, args[0])
    if origin in (typing.Union, types.UnionType):
        return next((k for a in args if (k := _too_large(value, a))), None)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if ann is float and abs(value) > MAX_FLOAT:
            return "float"
        return "int" if ann is int and isinstance(value, int) and abs(value) > MAX_INT else None
    if origin in (list, tuple, set, frozenset) and isinstance(value, (list, tuple)) and args:
        if origin is tuple and args[-1] is not Ellipsis:
            pairs = zip(value, args, strict=False)
            return next((k for v, a in pairs if (k := _too_large(v, a))), None)
        return next((k for v in value if (k := _too_large(v, args[0]))), None)
    if origin is dict and isinstance(value, dict) and len(args) == 2:
        return next((k for v in value.values() if (k := _too_large(v, args[1]))), None)
    return None


def _has_upper_bound(field: Any) -> bool:
    return any(hasattr(m, "le") or hasattr(m, "lt") for m in field.metadata)


#: seeds reach numpy (which takes 0 to 2**32 - 1) and some stages add offsets to them
MAX_SEED = 2**31 - 1
#: the largest magnitude of a float setting: float32 arithmetic overflows at 3.4e38, and a
#: learning rate near that overflows in the optimizer's first step
MAX_FLOAT = 1e30
#: upper limits of the counts and sizes a config sets (far beyond any model or run trained
#: today, low enough that a typing slip such as ``10**30`` is refused by ``validate``): each
#: field's refusal names its accepted range
MAX_STEPS = 100_000_000  # optimizer steps of one training stage
MAX_BATCH = 1_048_576  # sequences per step, micro-batches accumulated
MAX_LENGTH = 1_048_576  # tokens per sequence, positions
MAX_WIDTH = 1_048_576  # hidden and MLP widths
MAX_LAYERS = 10_000  # decoder blocks
MAX_HEADS = 10_000  # attention heads
MAX_VOCAB = 16_777_216  # vocabulary entries (2**24)
#: the largest magnitude of an integer setting that has no upper limit of its own: torch and
#: numpy hold integers in 64 bits
MAX_INT = 2**63 - 1


def _is_seed(name: str) -> bool:
    return name in ("seed", "seeds") or name.endswith("_seed")


def _bad_seed(value: Any) -> bool:
    values = value if isinstance(value, (list, tuple)) else [value]
    return any(
        isinstance(v, int) and not isinstance(v, bool) and not 0 <= v <= MAX_SEED for v in values
    )


#: ``Field(json_schema_extra=NOT_FINGERPRINTED)`` marks a setting that does not change what a
#: stage produces (a report's headline metric): it is left out of stage fingerprints
NOT_FINGERPRINTED: dict[str, Any] = {"fingerprint": False}
#: ``Field(json_schema_extra=FINGERPRINTED_UNLESS_DEFAULT)`` marks an option added after stages
#: were cached: it enters a stage's fingerprint only when it differs from its default, so the
#: entries of configs that do not use it keep their fingerprints
FINGERPRINTED_UNLESS_DEFAULT: dict[str, Any] = {"fingerprint": "unless_default"}
#: ``Field(json_schema_extra=FINGERPRINTED_AS_DUMPED)`` marks a field of typed objects that
#: serialise to another form (``train.plugins``: each plugin's options, dumped as its entry
#: ``{name: NAME, ...}``): it enters fingerprints as its dump, not as the objects' fields
FINGERPRINTED_AS_DUMPED: dict[str, Any] = {"fingerprint": "as_dumped"}


def fingerprinted_as(old: str) -> dict[str, Any]:
    """``Field(json_schema_extra=fingerprinted_as("old_name"))`` marks a renamed setting: it
    enters stage fingerprints under its old name, so a config that only uses the new name
    keeps its cache entries (the old name is still read: :func:`renamed`)."""
    return {"fingerprint_as": old}


def fingerprint_renames(cls: type[BaseModel], **old_names: str) -> None:
    """Mark inherited fields of ``cls`` (a section whose base class declares them) as renamed
    from ``old_names`` for stage fingerprints, as :func:`fingerprinted_as` marks a field
    declared in the class itself; the base class's fields are left as they are."""
    for name, old in old_names.items():
        cls.model_fields[name].json_schema_extra = fingerprinted_as(old)


def fingerprint_name(extra: Any, name: str) -> str:
    """The name a field enters stage fingerprints under (its old name when renamed)."""
    return str(extra.get("fingerprint_as", name)) if isinstance(extra, dict) else name


def renamed(data: Any, moves: dict[str, str], where: str) -> Any:
    """Read keys of an older config under their new names: ``moves`` maps an old dotted key
    to its new dotted key, both relative to ``data`` (a section's mapping). Each old key
    found is moved with a :class:`~polymnesia.errors.ConfigWarning` naming both; one given
    under both names is one line naming both."""
    if not isinstance(data, dict) or not moves:
        return data
    data = copy.deepcopy(data)
    for old, new in moves.items():
        *old_parents, old_leaf = old.split(".")
        holder: Any = data
        for part in old_parents:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if not isinstance(holder, dict) or old_leaf not in holder:
            continue
        value = holder.pop(old_leaf)
        *new_parents, new_leaf = new.split(".")
        target = data
        for part in new_parents:
            child = target.get(part)
            child = dict(child) if isinstance(child, dict) else {}
            target[part] = child
            target = child
        prefix = f"{where}." if where else ""
        if new_leaf in target:
            raise ValueError(
                f"{prefix}{old} is the old name of {prefix}{new}; give only {prefix}{new}"
            )
        target[new_leaf] = value
        warnings.warn(
            f"{prefix}{old} is now {prefix}{new}; the old name is still read",
            ConfigWarning,
            stacklevel=2,
        )
    return data


class StrictModel(BaseModel):
    """A config section: unknown keys are errors, values are validated on load.

    Beyond pydantic's checks, every section refuses non-finite numbers
    (``.inf``, ``.nan``) in float fields, booleans where a number is meant
    (``steps: true`` would otherwise be read as 1), numbers where a boolean is
    meant (``progress_bar: 0``), floats beyond :data:`MAX_FLOAT` in magnitude
    (``lr: 1e39`` overflows float32 in the optimizer) and seeds (``seed``,
    ``seeds``, ``*_seed``) outside 0 to :data:`MAX_SEED` (numpy refuses a negative
    seed or one of 2**40 at the stage that first draws).

    Field descriptions double as documentation (``polymnesia ls``, docs).
    """

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, protected_namespaces=(), allow_inf_nan=False
    )

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and _bool_where_number(value, field.annotation):
            raise ValueError(
                "a boolean is not accepted where a number is meant, nor a number where a "
                "boolean is (use true or false)"
            )
        if field is not None and _is_seed(info.field_name or "") and _bad_seed(value):
            raise ValueError(
                f"seeds must be non-negative (0 or more) and at most {MAX_SEED} (2**31 - 1)"
            )
        large = _too_large(value, field.annotation) if field is not None else None
        if large == "int" and field is not None and _has_upper_bound(field):
            large = None  # the field's own limit says its range
        if large:
            if large == "float":
                raise ValueError(
                    "a number this large overflows float32 arithmetic; give at most "
                    f"{MAX_FLOAT:g} in magnitude"
                )
            raise ValueError(
                f"an integer this large overflows 64-bit arithmetic; give at most {MAX_INT:,} "
                "(2**63 - 1) in magnitude"
            )
        return value


def submodels(node: Any, path: str = "") -> list[tuple[str, BaseModel]]:
    """Every config model inside ``node`` (``node`` itself included, then its fields, dicts
    and lists, depth first), each with its dotted path (``""`` for ``node``)."""
    out: list[tuple[str, BaseModel]] = []
    if isinstance(node, BaseModel):
        out.append((path, node))
        items: Any = ((k, getattr(node, k)) for k in type(node).model_fields)
    elif isinstance(node, dict):
        items = node.items()
    elif isinstance(node, (list, tuple)):
        items = enumerate(node)
    else:
        return out
    for key, value in items:
        out += submodels(value, f"{path}.{key}" if path else str(key))
    return out

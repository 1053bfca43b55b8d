"""Base class for every typed config section."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator


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


#: ``Field(json_schema_extra=NOT_FINGERPRINTED)`` marks a setting that does not change what a
#: stage produces (a report's headline metric): it is left out of stage fingerprints
NOT_FINGERPRINTED: dict[str, Any] = {"fingerprint": False}
#: ``Field(json_schema_extra=FINGERPRINTED_UNLESS_DEFAULT)`` marks an option added after stages
#: were cached: it enters a stage's fingerprint only when it differs from its default, so the
#: entries of configs that do not use it keep their fingerprints
FINGERPRINTED_UNLESS_DEFAULT: dict[str, Any] = {"fingerprint": "unless_default"}


class StrictModel(BaseModel):
    """A config section: unknown keys are errors, values are validated on load.

    Beyond pydantic's checks, every section refuses non-finite numbers
    (``.inf``, ``.nan``) in float fields, booleans where a number is meant
    (``steps: true`` would otherwise be read as 1) and numbers where a boolean is
    meant (``progress_bar: 0``).

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

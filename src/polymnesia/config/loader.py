"""Load YAML configs, apply ``a.b=value`` overrides, validate into typed objects.

Every failure becomes one :class:`~polymnesia.errors.ConfigError` line naming
the key, the bad value and what is accepted (with a close-match suggestion).

The YAML dialect is safe YAML with three changes: ``1e-3`` is a float (YAML
1.1 needs ``1.0e-3``), only ``true``/``false`` are booleans (YAML 1.1 also
reads ``no``, ``off``, ``yes``, ``on`` as booleans, which turns the Norwegian
language code ``no`` and ``mixed_precision: no`` into ``false``), and a key
given twice in one mapping is an error (YAML would keep the last). Non-finite
numbers (``.inf``, ``.nan``) are refused anywhere in a config.

A config may come from anyone, so YAML is bounded before it is built into objects
(:func:`check_bounds`, on the parser's events, which need no recursion): a file of at
most :data:`MAX_YAML_BYTES`, at most :data:`MAX_DEPTH` nested collections, at most
:data:`MAX_NODES` values once every alias is expanded, values of at most
:data:`MAX_SCALAR_CHARS` characters and integers of at most :data:`MAX_INT_DIGITS` digits.
An anchor bomb (aliases of aliases), thousands of nested brackets or an integer of 5,000
digits are one line, at once, instead of minutes of expansion, a RecursionError or Python's
digit-limit ValueError.
"""

from __future__ import annotations

import copy
import math
import re
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from polymnesia.errors import ConfigError, suggest


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads ``1e-3`` as a float (YAML 1.1 needs a dot: ``1.0e-3``)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


_BOOL = "tag:yaml.org,2002:bool"
_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != _BOOL]
    for first, resolvers in _Loader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _mapping_without_duplicates(loader: _Loader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, Any] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`: merged by SafeLoader
            continue
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, (str, int, float, bool)) and key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"key '{key}' is given twice in one mapping", key_node.start_mark
            )
        seen[key] = True
    return loader.construct_mapping(node, deep=True)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping_without_duplicates)


#: the largest config file read (the shipped configs are a few KiB)
MAX_YAML_BYTES = 1 << 20
#: the deepest nesting of mappings and lists (the shipped configs nest 5 deep)
MAX_DEPTH = 50
#: the most values (scalars, mappings, lists) a config may hold with every alias expanded
MAX_NODES = 100_000
#: the longest single value (a path, a pattern, a description) in characters
MAX_SCALAR_CHARS = 10_000
#: the most digits of an integer (Python refuses to read one of more than 4,300 digits; the
#: largest count a config holds, a step or a byte count, has a dozen, and each count's own
#: upper limit, checked with the config, names its range)
MAX_INT_DIGITS = 100
_INT = "tag:yaml.org,2002:int"


def _is_int(value: str) -> bool:
    """Whether the plain scalar ``value`` reads as an integer in polymnesia's dialect (the
    resolvers of :class:`_Loader` for its first character, in their order)."""
    for tag, rx in _Loader.yaml_implicit_resolvers.get(value[:1], []):
        if rx.match(value):
            return bool(tag == _INT)
    return False


def _check_scalar(event: yaml.ScalarEvent) -> None:
    value = event.value
    if len(value) > MAX_SCALAR_CHARS:
        raise ConfigError(
            f"{_line(event)}a value of {len(value):,} characters; a config value holds at most "
            f"{MAX_SCALAR_CHARS:,}"
        )
    plain = event.implicit[0] and event.tag is None
    digits = sum(c.isdigit() for c in value)
    if plain and digits > MAX_INT_DIGITS and _is_int(value):
        raise ConfigError(
            f"{_line(event)}an integer of {digits:,} digits; accepted: integers of at most "
            f"{MAX_INT_DIGITS} digits (each count in a config has its own upper limit)"
        )


def _line(event: yaml.Event) -> str:
    mark = event.start_mark
    return f"line {mark.line + 1}: " if mark is not None else ""


def check_bounds(text: str) -> None:
    """Refuse YAML beyond the bounds above (one :class:`ConfigError` line naming the line),
    walking the parser's events once: each anchor's expanded size is recorded when its node
    ends, so an alias adds its size without being expanded. Malformed YAML is left to the
    loader, which says where."""
    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(
            f"the YAML is {len(text):,} characters; a config holds at most {MAX_YAML_BYTES:,}"
        )
    sizes: dict[str, int] = {}
    stack: list[list[Any]] = []  # [anchor, expanded size] of each open mapping or list
    total = 0
    try:
        for event in yaml.parse(text, Loader=_Loader):  # noqa: S506 - events only, no objects
            if isinstance(event, yaml.CollectionStartEvent):
                if len(stack) >= MAX_DEPTH:
                    raise ConfigError(
                        f"{_line(event)}the YAML nests more than "
                        f"{MAX_DEPTH} mappings or lists deep; a config nests a few levels"
                    )
                stack.append([event.anchor, 1])
                continue
            if isinstance(event, yaml.CollectionEndEvent):
                anchor, size = stack.pop()
                if anchor is not None:
                    sizes[anchor] = size
            elif isinstance(event, yaml.ScalarEvent):
                _check_scalar(event)
                size = 1
                if event.anchor is not None:
                    sizes[event.anchor] = 1
            elif isinstance(event, yaml.AliasEvent):
                size = sizes.get(event.anchor or "", 1)  # an unknown anchor: the loader says so
            else:
                continue
            if stack:
                stack[-1][1] += size
                grown = stack[-1][1]
            else:
                total += size
                grown = total
            if grown > MAX_NODES:
                raise ConfigError(
                    f"{_line(event)}the YAML expands to more than {MAX_NODES:,} values (aliases of "
                    "aliases: an anchor bomb?); a config holds a few hundred"
                )
    except yaml.YAMLError:
        return  # malformed: the loader reports it with its line


def parse_yaml(text: str) -> Any:
    """Text to plain objects in polymnesia's YAML dialect, within :func:`check_bounds`."""
    check_bounds(text)
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping, with one-line errors for missing files and bad syntax."""
    p = Path(path)
    try:
        is_dir, is_file = p.is_dir(), p.is_file()
    except OSError as e:  # a name too long for the file system (an override given as a path?)
        shown = str(p) if len(str(p)) <= 80 else f"{str(p)[:60]}... ({len(str(p)):,} characters)"
        raise ConfigError(f"cannot read config {shown}: {e.strerror}") from None
    if is_dir:
        raise ConfigError(f"config {p} is a folder; name a YAML file (configs/*.yaml)")
    if not is_file:
        raise ConfigError(f"config file not found: {p}")
    try:
        size = p.stat().st_size
        if size > MAX_YAML_BYTES:
            raise ConfigError(
                f"config {p} is {size:,} bytes; a config holds at most {MAX_YAML_BYTES:,} "
                "(is it the right file?)"
            )
        data = parse_yaml(p.read_text(encoding="utf-8"))
    except ConfigError as e:
        raise ConfigError(
            f"config {p}: {e}" if not str(e).startswith("config ") else str(e)
        ) from None
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"config {p} is not UTF-8 text (byte {e.start}: {e.object[e.start : e.start + 1]!r}); "
            "a config is a YAML file saved as UTF-8"
        ) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"malformed YAML in {p}{where}: {problem}") from None
    except OSError as e:
        raise ConfigError(f"cannot read config {p}: {e.strerror}") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"config {p} must be a YAML mapping at the top level, got {type(data).__name__}"
        )
    return data


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``data`` with ``a.b.c=value`` overrides applied (values parsed as YAML)."""
    out = copy.deepcopy(data)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"override '{item}' must look like key.path=value")
        key, raw = item.split("=", 1)
        parts = [p for p in key.strip().split(".") if p]
        if not parts:
            raise ConfigError(f"override '{item}' has an empty key")
        try:
            value = parse_yaml(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        except ConfigError as e:
            raise ConfigError(f"override '{key}': {e}") from None
        node = out
        for i, part in enumerate(parts[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(
                    f"override '{key}': '{'.'.join(parts[: i + 1])}' is not a mapping"
                )
            node = nxt
        node[parts[-1]] = value
    return out


def _section_at(model: type[BaseModel], loc: tuple[Any, ...]) -> Any:
    """The (sub)model class that ``loc`` points into (its last part a key of it), or None."""
    current: Any = model
    for part in loc[:-1]:
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return []
        ann = fields[part].annotation
        candidates = [ann, *getattr(ann, "__args__", ())]
        current = next(
            (c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None
        )
        if current is None:
            return None
    return current


def _fields_at(model: type[BaseModel], loc: tuple[Any, ...]) -> list[str]:
    """Field names of the (sub)model that ``loc`` points into, for suggestions."""
    return list(getattr(_section_at(model, loc), "model_fields", {}))


def _section_keys(section: Any, name: str, depth: int = 2, prefix: str = "") -> list[str]:
    """The dotted keys below ``section`` (its sections, ``depth`` levels down) whose last part
    is ``name``: ``preset`` at the top of a config is ``model.preset``."""
    found: list[str] = []
    for field, info in getattr(section, "model_fields", {}).items():
        for sub in _options(info.annotation):
            if isinstance(sub, type) and issubclass(sub, BaseModel):
                if name in sub.model_fields:
                    found.append(f"{prefix}{field}.{name}")
                elif depth > 1:
                    found.extend(_section_keys(sub, name, depth - 1, f"{prefix}{field}."))
                break
    return found


#: pydantic's wording of a value of the wrong type, by error type, in polymnesia's words
TYPE_WORDS = {
    "dict_type": "expected a section of keys (key: value lines)",
    "model_type": "expected a section of keys (key: value lines)",
    "model_attributes_type": "expected a section of keys (key: value lines)",
    "list_type": "expected a list, e.g. [a, b]",
    "tuple_type": "expected a list, e.g. [a, b]",
    "set_type": "expected a list, e.g. [a, b]",
    "int_type": "expected a whole number",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number, not a fraction",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "string_type": "expected a text (quote a value that YAML reads as a number or a date)",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
}


def _type_words(first: Any) -> str | None:
    """polymnesia's words for pydantic's error ``first``, where they differ from its own."""
    kind = first["type"]
    ctx = first.get("ctx") or {}
    bound = {"greater_than": ("gt", "greater than"), "greater_than_equal": ("ge", "at least")}
    bound |= {"less_than": ("lt", "less than"), "less_than_equal": ("le", "at most")}
    if kind in bound and bound[kind][0] in ctx:
        return f"must be {bound[kind][1]} {ctx[bound[kind][0]]}"
    if kind in ("literal_error", "enum"):
        expected = str((first.get("ctx") or {}).get("expected", ""))
        return f"accepted: {expected}" if expected else None
    return TYPE_WORDS.get(kind)


def _options(ann: Any) -> list[Any]:
    """The types ``ann`` may be (``Optional``, unions and ``Annotated`` opened)."""
    if typing.get_origin(ann) is typing.Annotated:
        return _options(typing.get_args(ann)[0])
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        return [o for a in typing.get_args(ann) for o in _options(a) if o is not type(None)]
    return [ann]


def field_at(model: type[BaseModel], loc: tuple[Any, ...]) -> FieldInfo | None:
    """The pydantic field that the error location ``loc`` points at (through sections, lists
    and mappings), or None where it cannot tell."""
    current: Any = model
    info: FieldInfo | None = None
    for part in loc:
        options = _options(current)
        models = [o for o in options if isinstance(o, type) and issubclass(o, BaseModel)]
        if models and isinstance(part, str) and part in models[0].model_fields:
            info = models[0].model_fields[part]
            current = info.annotation
            continue
        containers = [o for o in options if typing.get_origin(o) in (list, tuple, dict)]
        if len(containers) != 1 or not typing.get_args(containers[0]):
            return None
        args = typing.get_args(containers[0])
        current = args[-1] if typing.get_origin(containers[0]) is dict else args[0]
        info = None
    return info


def _bounds(info: FieldInfo) -> tuple[Any, Any]:
    """The smallest and largest integer ``info``'s constraints (``gt``, ``ge``, ``lt``, ``le``:
    pydantic keeps each as one metadata object) accept; None where a side is open."""
    low = high = None
    for m in info.metadata:
        ge, gt = getattr(m, "ge", None), getattr(m, "gt", None)
        le, lt = getattr(m, "le", None), getattr(m, "lt", None)
        if isinstance(ge, int):
            low = ge
        elif isinstance(gt, int):
            low = gt + 1
        if isinstance(le, int):
            high = le
        elif isinstance(lt, int):
            high = lt - 1
    return low, high


def accepted_range(info: FieldInfo | None) -> str | None:
    """``"1 to 100,000,000"`` for an integer field bounded on both sides, else None."""
    if info is None or int not in _options(info.annotation):
        return None
    low, high = _bounds(info)
    if isinstance(low, int) and isinstance(high, int):
        return f"{low:,} to {high:,}"
    return None


#: pydantic's error types of a bound (``gt``, ``ge``, ``lt``, ``le``) that a value is beyond
BOUND_ERRORS = ("greater_than", "greater_than_equal", "less_than", "less_than_equal")


def format_validation_error(err: ValidationError, model: type[BaseModel], source: str = "") -> str:
    """One line for the first error of a pydantic ``ValidationError``."""
    first = err.errors()[0]
    loc = tuple(first.get("loc", ()))
    key = ".".join(str(p) for p in loc) or "<root>"
    where = f"{source}: " if source else ""
    if first["type"] == "extra_forbidden":
        fields = _fields_at(model, loc)
        accepted = f"; accepted: {', '.join(fields)}" if fields else ""
        hint = suggest(str(loc[-1]), fields)
        if not hint and (deeper := _section_keys(_section_at(model, loc), str(loc[-1]))):
            above = ".".join(str(p) for p in loc[:-1])
            hint = f" (did you mean '{above + '.' if above else ''}{deeper[0]}'?)"
        return f"{where}unknown key '{key}'{hint}{accepted}"
    value = first.get("input")
    shown = repr(value) if not isinstance(value, dict) else "a section of keys"
    if first["type"] == "missing":
        return f"{where}missing required key '{key}'"
    msg = first["msg"]
    if msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if first["type"] in BOUND_ERRORS and (bounds := accepted_range(field_at(model, loc))):
        msg = f"out of range; accepted: {bounds}"
    elif words := _type_words(first):
        msg = words
    return f"{where}bad value for '{key}': {shown}: {msg}"


def check_finite(data: Any, source: str = "", path: str = "") -> None:
    """Refuse ``.inf``/``.nan`` anywhere in a raw config (one line naming the key)."""
    if isinstance(data, float) and not math.isfinite(data):
        where = f"{source}: " if source else ""
        raise ConfigError(
            f"{where}bad value for '{path or '<root>'}': {data!r}: numbers in a config must be "
            "finite"
        )
    if isinstance(data, dict):
        for k, v in data.items():
            check_finite(v, source, f"{path}.{k}" if path else str(k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            check_finite(v, source, f"{path}.{i}" if path else str(i))


def validate(model: type[BaseModel], data: dict[str, Any], source: str = "") -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, model, source)) from None

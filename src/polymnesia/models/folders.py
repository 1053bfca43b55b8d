"""Local model folders read before anything loads them: ``config.json``, the safetensors
headers, ``auto_map``, and whether a tokenizer fits the model.

``from_pretrained`` trusts a folder: a ``config.json`` with a width of 2**40 or a negative
layer count, a safetensors header whose 8-byte length field says 2**60, a tensor that claims
more bytes than the file holds, or an ``auto_map`` naming code in the folder stop it with a
traceback, after the stages before it ran. :func:`check_model_folder` reads the same files
without loading a weight or running any code, and refuses each of these in one line:

- ``config.json``: at most :data:`MAX_CONFIG_BYTES`, UTF-8, a JSON object; every size it
  gives (:data:`SIZE_KEYS`, at any depth: ``text_config`` too) a whole number from 1 to
  :data:`MAX_SIZE`;
- an ``auto_map`` (classes defined by Python files in the folder) only with
  ``trust_remote_code``, which polymnesia grants only with ``--trust-remote-code``;
- the weights are ``model.safetensors`` or the shards of ``model.safetensors.index.json``
  (plain file names inside the folder); each header is read by hand
  (:func:`polymnesia.models.safetensors_headers.read_header`):
  its length field at most :data:`MAX_HEADER_BYTES` and inside the file, a JSON object of
  tensors whose dtype is known, whose shape is a list of whole numbers, and whose
  ``data_offsets`` cover the data that follows exactly, back to back, each ``dtype x shape``
  bytes long (what the safetensors library checks when it opens the file);
- the model ``config.json`` describes, built on the meta device (no memory, no weights):
  every tensor of the headers that it has must have its shape, and its blocks (``layers.0``,
  ``h.0``, ...) are the blocks the weights hold.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from polymnesia.errors import PolymnesiaError
from polymnesia.models.build import is_encoder
from polymnesia.models.safetensors_headers import Tensor, read_header

#: a ``config.json`` larger than this is not a model config
MAX_CONFIG_BYTES = 16 << 20
#: no size of a real model reaches this (widths, vocabularies, context lengths, layer counts)
MAX_SIZE = 1 << 24
#: ``config.json`` keys that are sizes (a whole number >= 1, or null where transformers
#: derives it); read at any depth
SIZE_KEYS = frozenset(
    {
        "vocab_size",
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
        "head_dim",
        "max_position_embeddings",
        "n_embd",
        "n_inner",
        "n_layer",
        "n_head",
        "n_positions",
        "n_ctx",
        "d_model",
        "d_ff",
        "num_layers",
        "num_heads",
        "ffn_dim",
    }
)
#: the layer-count keys, named when the blocks of the config and of the weights differ
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
#: no model has more layers (the largest have a few hundred); the check builds every layer
#: on the meta device
MAX_LAYERS = 1024
#: the files a tokenizer folder holds (any one of them)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model")
WEIGHTS, INDEX = "model.safetensors", "model.safetensors.index.json"


@dataclass
class FolderInfo:
    """What :func:`check_model_folder` read: the config and every tensor's header entry."""

    config: dict[str, Any]
    tensors: dict[str, Tensor] = field(default_factory=dict)
    #: the rows of the input embedding matrix, where the model could be built on meta
    embedding_rows: int | None = None


def is_model_folder(name: str | None) -> bool:
    """Whether ``name`` is an existing local folder (as the model loader reads it)."""
    if not name:
        return False
    try:
        return Path(name).expanduser().is_dir()
    except OSError:
        return False


def has_tokenizer(folder: str | Path) -> bool:
    """Whether ``folder`` holds tokenizer files of its own."""
    return any((Path(folder).expanduser() / f).is_file() for f in TOKENIZER_FILES)


def _json_file(path: Path, what: str, limit: int) -> Any:
    try:
        size = path.stat().st_size
        if size > limit:
            raise PolymnesiaError(
                f"{what} {path} is {size:,} bytes; a model folder's JSON files are at most "
                f"{limit:,} bytes"
            )
        raw = path.read_bytes()
    except OSError as e:
        raise PolymnesiaError(
            f"cannot read {what} {path}: {e.strerror or type(e).__name__}"
        ) from None
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise PolymnesiaError(f"{what} {path} is not UTF-8 text") from None
    except (ValueError, RecursionError) as e:
        raise PolymnesiaError(f"{what} {path} is not JSON ({str(e).splitlines()[0]})") from None


def read_config(folder: Path) -> dict[str, Any]:
    """``folder/config.json`` as a JSON object whose sizes are whole numbers in range."""
    path = folder / "config.json"
    if not path.is_file():
        raise PolymnesiaError(
            f"model folder {folder} has no config.json; a model folder is what save_pretrained "
            "writes (config.json and safetensors weights)"
        )
    config = _json_file(path, "model config", MAX_CONFIG_BYTES)
    if not isinstance(config, dict):
        raise PolymnesiaError(f"model config {path} holds {type(config).__name__}, not an object")
    _check_sizes(config, path, "", 0)
    return config


def _check_sizes(node: Any, path: Path, where: str, depth: int) -> None:
    if depth > 8:
        return
    if isinstance(node, dict):
        items: list[tuple[Any, Any]] = list(node.items())
    else:
        items = list(enumerate(node)) if isinstance(node, list) else []
    for key, value in items:
        at = f"{where}.{key}" if where else str(key)
        if isinstance(key, str) and key in SIZE_KEYS:
            # a list gives one size per layer (a few architectures do)
            sizes = value if isinstance(value, list) and value else [value]
            top, what = (MAX_LAYERS, "layer count") if key in LAYER_KEYS else (MAX_SIZE, "size")
            ok = value is None or all(
                isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= top for v in sizes
            )
            if not ok:
                raise PolymnesiaError(
                    f"model config {path}: {at} is {json.dumps(value)[:40]}; a {what} is a "
                    f"whole number from 1 to {top:,} (or null)"
                )
        elif isinstance(value, (dict, list)):
            _check_sizes(value, path, at, depth + 1)


def read_weights(folder: Path) -> dict[str, Tensor]:
    """Every tensor of the folder's safetensors weights (one file, or the shards of the
    index), headers checked by :func:`read_header`."""
    if (folder / WEIGHTS).is_file():
        return read_header(folder / WEIGHTS)
    index = folder / INDEX
    if not index.is_file():
        raise PolymnesiaError(
            f"model folder {folder} holds no {WEIGHTS} (nor {INDEX}); polymnesia loads "
            "safetensors weights only (save_pretrained(..., safe_serialization=True) writes them)"
        )
    data = _json_file(index, "weights index", MAX_CONFIG_BYTES)
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
    ):
        raise PolymnesiaError(
            f"weights index {index} has no 'weight_map' of tensor names to shard files"
        )
    tensors: dict[str, Tensor] = {}
    for shard in sorted(set(weight_map.values())):
        if Path(shard).name != shard or shard in ("", ".", ".."):
            raise PolymnesiaError(
                f"weights index {index} names shard {shard!r}; a shard is a file name in the "
                "model folder"
            )
        if not (folder / shard).is_file():
            raise PolymnesiaError(f"weights index {index} names shard {shard}, which is missing")
        held = read_header(folder / shard)
        missing = [k for k, v in weight_map.items() if v == shard and k not in held]
        if missing:
            raise PolymnesiaError(
                f"weights index {index} puts '{missing[0][:80]}' in {shard}, which does not hold "
                "it; the folder is damaged"
            )
        tensors.update(held)
    return tensors


def remote_classes(config: dict[str, Any]) -> dict[str, str]:
    """The classes ``config.json``'s ``auto_map`` defines in the folder's own Python files."""
    auto_map = config.get("auto_map")
    if auto_map is None:
        return {}
    if not isinstance(auto_map, dict):
        return {"auto_map": json.dumps(auto_map)[:60]}
    return {str(k): json.dumps(v)[:60] for k, v in auto_map.items()}


def _known_type(config: dict[str, Any]) -> bool:
    from transformers import CONFIG_MAPPING

    kind = config.get("model_type")
    return isinstance(kind, str) and kind in CONFIG_MAPPING


def check_model_folder(
    folder: str | Path,
    *,
    trust_remote_code: bool,
    key: str,
    trust_key: str = "model.trust_remote_code",
) -> FolderInfo:
    """Read the model folder ``folder`` as :mod:`this module <polymnesia.models.folders>`
    describes, without loading a weight or running its code; one line for the first problem.

    ``key`` names the config key that points at the folder; ``trust_remote_code`` is that
    model section's ``trust_key`` (an ``auto_map`` is refused without it)."""
    path = Path(folder).expanduser()
    config = read_config(path)
    classes = remote_classes(config)
    if classes and not trust_remote_code:
        first = next(iter(classes))
        raise PolymnesiaError(
            f"{key}: model folder {folder}'s config.json has an auto_map ({first} -> "
            f"{classes[first]}): classes defined by Python files in the folder, which polymnesia "
            f"does not run unless asked; to run them set {trust_key}: true and pass "
            "--trust-remote-code to `polymnesia run`"
            + (
                f", or remove auto_map to load the folder as transformers' own "
                f"{config['model_type']}"
                if _known_type(config)
                else ""
            )
        )
    info = FolderInfo(config, read_weights(path))
    if not classes:
        _compare_with_config(path, info)
    if info.embedding_rows is None:
        info.embedding_rows = config_rows(config)
    return info


def config_rows(config: dict[str, Any]) -> int | None:
    """The vocabulary size ``config.json`` gives (top level, else its ``text_config``)."""
    for node in (config, config.get("text_config")):
        if isinstance(node, dict) and isinstance(node.get("vocab_size"), int):
            return int(node["vocab_size"])
    return None


def _meta_model(folder: Path, config: dict[str, Any]) -> Any:
    """The model ``config.json`` describes, on the meta device; None where transformers needs
    a package that is missing. One line where transformers cannot build it at all."""
    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM

    try:
        conf = AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
    except ImportError:
        return None
    except Exception as e:  # noqa: BLE001 - from_pretrained would stop on it too
        raise PolymnesiaError(
            f"model config {folder / 'config.json'} cannot be read by transformers: "
            f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}"
        ) from None
    autos = (AutoModelForMaskedLM,) if is_encoder(conf) else (AutoModelForCausalLM, AutoModel)
    for auto in autos:
        try:
            with torch.device("meta"):
                return auto.from_config(conf)
        except ImportError:
            return None
        except ValueError as e:
            if "Unrecognized configuration class" in str(e) and auto is not autos[-1]:
                continue
            raise PolymnesiaError(
                f"model config {folder / 'config.json'} describes no model transformers can "
                f"build: {str(e).strip().splitlines()[0]}"
            ) from None
        except (TypeError, ZeroDivisionError, RuntimeError) as e:
            raise PolymnesiaError(
                f"model config {folder / 'config.json'} describes no model transformers can "
                f"build: {type(e).__name__}: {str(e).strip().splitlines()[0] if str(e) else ''}"
            ) from None
    return None


_BLOCK = re.compile(r"^(.*?)\.(\d+)\.")


def _blocks(names: Any) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for name in names:
        m = _BLOCK.match(name)
        if m:
            out.setdefault(m.group(1), set()).add(int(m.group(2)))
    return out


def _compare_with_config(folder: Path, info: FolderInfo) -> None:
    """The model of ``config.json`` (meta device) against the weights' headers: shapes of the
    tensors both have, and the blocks of each stack."""
    model = _meta_model(folder, info.config)
    if model is None:
        return
    params = {n: tuple(p.shape) for n, p in model.named_parameters()}
    prefix = str(getattr(model, "base_model_prefix", "") or "")
    weights: dict[str, tuple[int, ...]] = {}
    for name, t in info.tensors.items():
        for candidate in (name, f"{prefix}.{name}", name.removeprefix(f"{prefix}.")):
            if candidate in params:
                weights[candidate] = t.shape
                break
    where = folder / "config.json"
    for name, shape in weights.items():
        if params[name] != shape:
            raise PolymnesiaError(
                f"model config {where} gives {name} the shape {params[name]}, but the weights "
                f"hold {shape}; config.json and the weights disagree (vocab_size, hidden_size, "
                "intermediate_size or the head counts)"
            )
    if weights:
        ours, theirs = _blocks(params), _blocks(weights)
        for stack, held in theirs.items():
            described = ours.get(stack, set())
            if described != held:
                layer_key = next((k for k in LAYER_KEYS if k in info.config), "num_hidden_layers")
                raise PolymnesiaError(
                    f"model config {where} says {layer_key}: {info.config.get(layer_key)} "
                    f"({len(described)} blocks of {stack}), but the weights hold {len(held)}; "
                    "config.json and the weights disagree"
                )
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    rows = getattr(embeddings, "num_embeddings", None)
    info.embedding_rows = int(rows) if isinstance(rows, int) else None

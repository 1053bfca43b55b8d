"""What ``run``, ``validate``, ``plan`` and ``run --dry-run`` check before any stage runs,
in one place: the command line calls these, and tests call them directly.

- :func:`build_specs`: a protocol's stages from its config, a validation error raised while
  building them as one line, and data languages the source lacks refused;
- :func:`check_config`: what ``validate`` does for one config file (load, build, check the
  settings and lm-eval task names, plan the stages); :func:`check_loaded` all but the load;
- :func:`check_settings`: settings that a stage would refuse only when it runs (after the
  stages before it trained), checked against what is known without data or downloads:
  ``instruct.fields`` and instruction-set ``fields`` name known roles; the poly_* lm-eval
  tasks of a harness stage are in languages its data stage prepares; a token or span task
  without ``constructed`` is not set on a source whose records carry only a label; a LoRA
  rank fits the model's layers and a freezing ``pattern`` matches a weight matrix of the
  model, where the model is known without a download (a preset, or a local folder with a
  ``config.json``, built on the meta device: no memory, no weights); a local model folder
  reads as a model (:func:`~polymnesia.models.folders.check_model_folder`: ``config.json``'s
  sizes, the safetensors headers, ``auto_map`` only with ``trust_remote_code``), and a loaded
  model's tokenizer is its own and fits its embedding rows (:func:`check_tokenizers`);
- :func:`check_harness_names`: lm-eval task names that polymnesia does not ship are in
  lm-eval's task index;
- :func:`preflight`: what the config asks of this machine (precision, attention kernel,
  trackers), before ``run`` trains anything;
- :func:`check_remote_code`: ``trust_remote_code: true`` only with ``--trust-remote-code``;
- :func:`check_run_dir_place`: a run folder is not under ``/proc``, ``/sys`` or ``/dev`` and
  its nearest existing folder is writable;
- :func:`check_run_record`: a run folder's ``run.json``, when there is one, is a JSON object
  (``run`` and ``compare``).

Each refusal is one line naming what is wrong and what is accepted.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from polymnesia.config.base import submodels
from polymnesia.config.loader import format_validation_error
from polymnesia.data.catalog import check_known_languages
from polymnesia.data.config import DataConfig
from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.experiments.base import EXPERIMENTS
from polymnesia.experiments.loading import load_config
from polymnesia.experiments.two_phase.config import INSTRUCT
from polymnesia.harness.tasks import HARNESS_TASKS, check_tasks, expand, is_shipped
from polymnesia.hub import hub_offline, hub_reachable, in_hub_cache
from polymnesia.instructions.hub import ROLES
from polymnesia.models import ModelConfig
from polymnesia.models.build import check_attention, token_ids_needed
from polymnesia.models.folders import (
    TOKENIZER_FILES,
    FolderInfo,
    check_model_folder,
    has_tokenizer,
    is_model_folder,
)
from polymnesia.models.lora import LoraConfig, check_rank
from polymnesia.pipeline.runner import plan
from polymnesia.pipeline.stage import StageSpec
from polymnesia.stages.instruct import InstructConfig
from polymnesia.stages.instruction_data import InstructionSetConfig
from polymnesia.tasks.config import TaskConfig
from polymnesia.tokenizers.bpe import load_tokenizer
from polymnesia.training.config import TrainConfig, check_precision
from polymnesia.training.trackers import check_trackers
from polymnesia.trust import allow_remote_code

#: file systems that are views of the kernel, not places for a run's files
PSEUDO_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))
#: what ``instruct.fields`` maps (a Hub dataset's columns to the record's parts)
INSTRUCT_ROLES = ("instruction", "input", "output")
#: sources whose records carry a text and a label only (no ``meta["tags"]`` or answers)
LABEL_ONLY_SOURCES = ("bible", "udhr")


def check_run_dir_place(run_dir: Path) -> None:
    """One line for a run folder that cannot hold files: under ``/proc``, ``/sys`` or ``/dev``,
    below a file, or in a folder this user cannot write (checked without writing)."""
    resolved = Path(os.path.abspath(run_dir))
    with contextlib.suppress(OSError, RuntimeError):  # a loop of links: kept as written
        resolved = resolved.resolve()
    for root in PSEUDO_ROOTS:
        if resolved == root or root in resolved.parents:
            raise PolymnesiaError(
                f"cannot use run folder {run_dir}: it is under {root}, which the kernel provides "
                "and which holds no files; pass a --run-dir on a disk"
            )
    existing = resolved
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing != resolved and not existing.is_dir():
        raise PolymnesiaError(
            f"cannot use run folder {run_dir}: {existing} is a file; pass a --run-dir in a folder"
        )
    if existing.is_dir() and not os.access(existing, os.W_OK | os.X_OK):
        raise PolymnesiaError(
            f"cannot use run folder {run_dir}: {existing} is not writable; pass a writable "
            "--run-dir"
        )


def check_run_record(run_dir: Path, advice: str = "") -> None:
    """One line when ``run_dir/run.json`` exists but is not a JSON object (``[]``, ``null``,
    not UTF-8, not JSON): a run folder's record is damaged, and the run would stop on it."""
    record = run_dir / "run.json"
    if not record.exists():
        return
    why = ""
    try:
        data = json.loads(record.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        why = "it is not UTF-8 text"
    except ValueError as e:
        why = f"it is not JSON ({str(e).splitlines()[0]})"
    except OSError as e:
        why = f"it cannot be read ({e.strerror or type(e).__name__})"
    else:
        if not isinstance(data, dict):
            why = f"it holds {json.dumps(data)[:20]}, not a JSON object"
        elif not isinstance(data.get("stages", {}), dict):
            why = "its 'stages' is not a JSON object"
    if why:
        advice = advice or (
            f"pass another --run-dir, or remove {run_dir} to run afresh (the stage cache keeps "
            "what was built)"
        )
        raise PolymnesiaError(f"run folder {run_dir} has a damaged run.json ({why}); {advice}")


# -- settings a stage would refuse late ---------------------------------------------------


def check_settings(cfg: Any, specs: list[Any], source: str) -> None:
    """The settings a stage would refuse late (this module's docstring lists them), one
    :class:`ConfigError` line prefixed with ``config SOURCE:``."""
    try:
        check_tokenizers(cfg, specs, check_model_folders(cfg, specs))
        _check_fields(cfg)
        _check_harness_languages(specs)
        _check_task_kinds(cfg)
        _check_model_settings(cfg)
    except ConfigError as e:
        raise ConfigError(f"config {source}: {e}") from None


def _key_of(cfg: Any, model: ModelConfig) -> str:
    """The dotted path of the config's model section ``model`` (``model`` if not found)."""
    for path, node in submodels(cfg):
        if isinstance(node, ModelConfig) and node == model:
            return path or "model"
    return "model"


def _folders(cfg: Any, specs: list[Any]) -> list[tuple[str, str, bool, str]]:
    """(config key, folder, trust_remote_code, the key that grants it) of every local model
    folder the config or its stages load."""
    out: dict[str, tuple[str, str, bool, str]] = {}
    base = getattr(getattr(cfg, "base", None), "model", None)
    instruct_trust = "base.model" if isinstance(base, ModelConfig) else "model"
    found: list[tuple[str, str, ModelConfig]] = [
        (f"{p}.name_or_path" if p else "name_or_path", p or "model", n)
        for p, n in submodels(cfg)
        if isinstance(n, ModelConfig)
    ]
    for spec in specs:
        model = getattr(spec.params, "model", None)
        if isinstance(model, ModelConfig):
            key, _ = _pair_keys(cfg, model)
            section = instruct_trust if key == "instruct_model" else key.rsplit(".", 1)[0]
            found.append((key, section, model))
    for key, section, node in found:
        if is_model_folder(node.name_or_path):
            assert node.name_or_path is not None
            trust = (key, node.name_or_path, node.trust_remote_code, f"{section}.trust_remote_code")
            out.setdefault(node.name_or_path, trust)
    return list(out.values())


def check_model_folders(cfg: Any, specs: list[Any]) -> dict[str, FolderInfo]:
    """Every local model folder of the config reads as a model, without loading a weight or
    running its code (:func:`~polymnesia.models.folders.check_model_folder`); one line, naming
    the key, for the first that does not. Returns what was read, by folder name."""
    read: dict[str, FolderInfo] = {}
    for key, folder, trust, trust_key in _folders(cfg, specs):
        try:
            read[folder] = check_model_folder(
                folder, trust_remote_code=trust, key=key, trust_key=trust_key
            )
        except PolymnesiaError as e:
            text = str(e)
            raise ConfigError(text if text.startswith(key) else f"{key}: {text}") from None
    return read


def _pairs(specs: list[Any]) -> list[tuple[ModelConfig, str | None, Any]]:
    """(loaded model, its tokenizer's name_or_path or None for one trained here, the
    tokenizer section or None) of the stages that pair a loaded model with a tokenizer."""
    by_name = {s.name: s for s in specs}
    out: list[tuple[ModelConfig, str | None, Any]] = []
    for spec in specs:
        model = getattr(spec.params, "model", None)
        if not isinstance(model, ModelConfig) or not model.name_or_path:
            continue
        if spec.kind == "import_model":
            out.append((model, spec.params.tokenizer or model.name_or_path, None))
        elif spec.kind == "pretrain" and spec.inputs.get("tokenizer") in by_name:
            section = by_name[spec.inputs["tokenizer"]].params.tokenizer
            out.append((model, section.name_or_path, section))
    return out


def _same_folder(a: str, b: str) -> bool:
    try:
        return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()
    except (OSError, RuntimeError):
        return a == b


def _pair_keys(cfg: Any, model: ModelConfig) -> tuple[str, str | None]:
    """The config keys naming a loaded model and its tokenizer (``None``: the config has no
    key for it, as for two_phase's ``instruct_model``, read with its folder's tokenizer)."""
    instruct = model.name_or_path == getattr(cfg, "instruct_model", None)
    if instruct and not any(n == model for _, n in submodels(cfg)):
        return "instruct_model", None
    path = _key_of(cfg, model)
    parent = path.rsplit(".", 1)[0] + "." if "." in path else ""
    return f"{path}.name_or_path", f"{parent}tokenizer.name_or_path"


def check_tokenizers(cfg: Any, specs: list[Any], read: dict[str, FolderInfo] | None = None) -> None:
    """A loaded model (a local folder) is paired with its own tokenizer: one line when its
    folder has none and no other is named, when the named tokenizer is another (its
    vocabulary differs from the folder's own), or when the tokenizer's ids do not fit the
    model's embedding rows. A Hub model or tokenizer is checked when the stage loads it
    (:func:`~polymnesia.models.build.check_tokenizer_fits`). Vocabulary expansion stages
    (``adapt_vocabulary``) pair a model with its expanded tokenizer themselves, after
    resizing its embeddings; they are not pairs here. ``read``: what
    :func:`check_model_folders` read (the embedding rows)."""
    for model, tok_name, section in _pairs(specs):
        name = model.name_or_path
        assert name is not None
        if not is_model_folder(name):
            continue  # a Hub model: checked when the stage loads it
        key, tok_key = _pair_keys(cfg, model)
        info = (read or {}).get(name)
        rows = info.embedding_rows if info is not None else None
        if tok_name is None:
            size = section.vocab_size if section is not None else "a"
            raise ConfigError(
                f"{tok_key}: a {size}-token tokenizer trained here would feed {key} {name} ids "
                f"its embeddings never learnt; a loaded model takes its own tokenizer: set "
                f"{tok_key}: {name}"
            )
        own = _same_folder(tok_name, name)
        if own and not has_tokenizer(name):
            fix = (
                f"set {tok_key} to the tokenizer the model was trained with"
                if tok_key
                else "save the model's tokenizer into that folder (tokenizer.save_pretrained)"
            )
            raise ConfigError(
                f"{key} {name} has no tokenizer of its own (none of "
                f"{', '.join(TOKENIZER_FILES)}); {fix}"
            )
        if not own and not is_model_folder(tok_name):
            continue  # a Hub tokenizer: checked when the stage loads it
        try:
            tok = load_tokenizer(tok_name)
        except PolymnesiaError as e:
            raise ConfigError(f"{tok_key or key}: {e}") from None
        if not own and has_tokenizer(name):
            try:
                mine = load_tokenizer(name)
            except PolymnesiaError as e:
                raise ConfigError(f"{key}: {e}") from None
            if mine.get_vocab() != tok.get_vocab():
                raise ConfigError(
                    f"{tok_key} {tok_name} is not the tokenizer of {key} {name} ({len(tok)} "
                    f"tokens, the model's own {len(mine)}, and their vocabularies differ); a "
                    f"loaded model takes its own tokenizer: remove {tok_key} or set it to "
                    f"{name} (a new vocabulary goes through vocabulary expansion, "
                    "adapt_vocabulary, which resizes the embeddings)"
                )
        need = token_ids_needed(tok)
        if rows is not None and need > rows:
            raise ConfigError(
                f"{tok_key or 'the tokenizer'} {tok_name} has ids up to {need - 1}, but {key} "
                f"{name} has {rows} embedding rows; pair the model with the tokenizer it was "
                "trained with"
            )


def _check_fields(cfg: Any) -> None:
    for path, node in submodels(cfg):
        if isinstance(node, InstructConfig):
            accepted: tuple[str, ...] = INSTRUCT_ROLES
        elif isinstance(node, InstructionSetConfig):
            accepted = ROLES
        else:
            continue
        bad = sorted(set(node.fields) - set(accepted))
        if bad:
            raise ConfigError(
                f"{path}.fields: unknown role {', '.join(map(repr, bad))}; accepted: "
                f"{', '.join(accepted)} (each maps to a column of the dataset)"
            )


def _check_harness_languages(specs: list[Any]) -> None:
    """A poly_* task reads its documents from its stage's data input: its language must be one
    that data stage prepares (else the harness stage stops after every model trained)."""
    by_name = {s.name: s for s in specs}
    for spec in specs:
        if spec.kind != "evaluate_harness" or "data" not in spec.inputs:
            continue
        data = by_name.get(spec.inputs["data"])
        languages = getattr(getattr(data, "params", None), "languages", None)
        if not isinstance(languages, list):
            continue
        need = {t: HARNESS_TASKS.get(t).data_languages for t in expand(spec.params.tasks)}
        missing = [t for t, langs in need.items() if any(x not in languages for x in langs)]
        if missing:
            lang = next(x for x in need[missing[0]] if x not in languages)
            raise ConfigError(
                f"lm-eval task {missing[0]} reads language '{lang}', which the data does not "
                f"prepare (languages: {', '.join(languages)}); add '{lang}' to the data languages "
                "or pick a task in one of them"
            )


def _check_task_kinds(cfg: Any) -> None:
    """A token or span task needs records with tags or answers: a source whose records carry
    only a label has none, unless the task is ``constructed`` from labelled verses."""
    default = getattr(cfg, "data", None)
    for path, node in submodels(cfg):
        if not isinstance(node, TaskConfig) or node.kind == "sequence" or node.constructed:
            continue
        if getattr(cfg, "task_pivot", None) or getattr(cfg, "slot_field", None):
            continue  # lifelong builds its token task from these
        data = getattr(node, "data", None) or default
        if isinstance(data, DataConfig) and data.source in LABEL_ONLY_SOURCES:
            what = "tags (one per word)" if node.kind == "token" else "questions and answers"
            hint = "genre_segments" if node.kind == "token" else "genre_question"
            raise ConfigError(
                f"{path}.kind is '{node.kind}', but the {data.source} source's records carry a "
                f"label per text, no {what}; set {path}.constructed: {hint} to build the task from "
                "labelled verses, or use a source whose records carry them"
            )


def _candidate_models(cfg: Any) -> list[Any]:
    """The model configs (or folder names) of the models this config trains: its model
    sections (each preset of ``sizes``), and ``instruct_model``."""
    models: list[Any] = []
    for _, node in submodels(cfg):
        if isinstance(node, ModelConfig) and node not in models:
            models.append(node)
    sizes = getattr(cfg, "sizes", None)
    if sizes and models:
        models = [models[0].model_copy(update={"preset": s}) for s in sizes]
    if isinstance(getattr(cfg, "instruct_model", None), str):
        models.append(cfg.instruct_model)
    return models


def skeleton(model: Any) -> Any:
    """The model of ``model`` (a :class:`~polymnesia.models.ModelConfig` or a folder name) on
    the meta device, or None when it cannot be known without a download or remote code."""
    import torch

    name = model.name_or_path if isinstance(model, ModelConfig) else model
    try:
        if name is None:
            from transformers import MistralConfig, MistralForCausalLM

            conf = MistralConfig(vocab_size=512, sliding_window=None, **model.dims())
            with torch.device("meta"):
                return MistralForCausalLM(conf)
        folder = Path(str(name)).expanduser()
        if not (folder / "config.json").is_file():
            return None  # a Hub id: known only after a download
        from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

        conf = AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
        with torch.device("meta"):
            try:
                return AutoModelForCausalLM.from_config(conf)
            except ValueError:
                return AutoModel.from_config(conf)
    except Exception:  # noqa: BLE001 - unknown here: the stage checks it when it loads
        return None


def _check_model_settings(cfg: Any) -> None:
    checks: list[tuple[str, list[Any], int | None, LoraConfig | None, str | None]] = []
    models = _candidate_models(cfg)
    trained = [m for m in models if not isinstance(m, str)] or models
    for path, node in submodels(cfg):
        if isinstance(node, InstructConfig) and node.lora_rank is not None:
            checks.append((f"{path}.lora_rank", trained, node.lora_rank, node.lora, None))
        if isinstance(node, TrainConfig):
            for i, plugin in enumerate(node.plugins):
                if plugin.get("name") == "layer_freezing" and plugin.get("pattern"):
                    key = f"{path}.plugins.{i}.pattern"
                    checks.append((key, models, None, None, plugin["pattern"]))
    lora, ranks = getattr(cfg, "lora", None), getattr(cfg, "ranks", None)
    if isinstance(lora, LoraConfig) and isinstance(ranks, list):  # lifelong's LoRA arms
        for i, rank in enumerate(ranks):
            checks.append((f"ranks.{i}", trained, rank, lora, None))
    m = getattr(cfg, "mitigation", None)
    if m is not None and getattr(cfg, "pairs", None):
        phase1 = cfg.pairs[m.pair].phase1
        tuned = [cfg.instruct_model if phase1 == INSTRUCT else cfg.base.model]
        if m.lora_rank is not None:
            checks.append(("mitigation.lora_rank", tuned, m.lora_rank, LoraConfig(), None))
        for i, arm in enumerate(m.freezing):
            if arm.pattern:
                checks.append((f"mitigation.freezing.{i}.pattern", tuned, None, None, arm.pattern))
    built: dict[int, Any] = {}
    for key, targets, rank, lora, pattern in checks:
        for target in targets:
            if id(target) not in built:
                built[id(target)] = skeleton(target)
            model = built[id(target)]
            if model is None:
                continue
            if rank is not None and lora is not None:
                try:
                    check_rank(model, rank, lora)
                except PolymnesiaError as e:
                    raise ConfigError(f"{key}: {e}") from None
            if pattern is not None:
                rx = re.compile(pattern)
                names = [n for n, p in model.named_parameters() if p.ndim >= 2]
                if not any(rx.search(n) for n in names):
                    raise ConfigError(
                        f"{key}: {pattern!r} matches no weight matrix of the model "
                        f"({_describe(target)}; e.g. {', '.join(names[2:4])})"
                    )


def _describe(model: Any) -> str:
    return model if isinstance(model, str) else model.describe()


# -- stages, machine and trust -------------------------------------------------------


def build_specs(exp: Any, cfg: Any, source: str) -> list[Any]:
    """``exp.build(cfg)``, with a validation error raised while building turned into one line."""
    try:
        specs = list(exp.build(cfg))
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, exp.Config, source)) from None
    for spec in specs:  # a language the source lacks: refused now, not at its data stage
        if spec.kind == "prepare_data":
            d = spec.params.data
            check_known_languages(d.source, d.options, spec.params.languages, f"config {source}")
    return specs


def check_config(path: str, overrides: list[str] | None = None) -> tuple[Any, list[StageSpec]]:
    """``validate`` for one config file: its config and stages, after every check that needs
    no data, no download and no model (one line for the first problem)."""
    cfg = load_config(path, overrides or [])
    return cfg, check_loaded(cfg, path)


def check_loaded(cfg: Any, path: str) -> list[StageSpec]:
    """The rest of :func:`check_config` for a config already read (``validate`` reads it with
    :func:`~polymnesia.experiments.loading.load_config` first, which loads no torch: a key
    typo or a missing file is answered before the stages are imported)."""
    specs = build_specs(EXPERIMENTS.get(cfg.experiment), cfg, path)
    check_settings(cfg, specs, path)
    check_harness_names(specs)
    plan(specs)
    return specs


def check_remote_code(cfg: Any, allowed: bool) -> None:
    """A config may ask for trust_remote_code; only ``--trust-remote-code`` (``allowed``)
    grants it."""

    def asked(node: Any, path: str) -> str | None:
        if isinstance(node, dict):
            for k, v in node.items():
                key = f"{path}.{k}" if path else str(k)
                if k == "trust_remote_code" and v is True:
                    return key
                if found := asked(v, key):
                    return found
        elif isinstance(node, list):
            for i, v in enumerate(node):
                if found := asked(v, f"{path}.{i}"):
                    return found
        return None

    key = asked(cfg.model_dump(mode="json"), "")
    if key and not allowed:
        raise PolymnesiaError(
            f"'{key}: true' asks to run code from a model, tokenizer or dataset repository; "
            "polymnesia runs such code only when the command line says so: add --trust-remote-code"
        )
    allow_remote_code(allowed)


def preflight(cfg: Any, device_type: str, source: str, specs: list[Any] | None = None) -> None:
    """What the config asks of this machine, checked before any stage runs (one line each):
    fp16 training needs an accelerator, an attention kernel what it runs on
    (:func:`~polymnesia.models.build.check_attention`), a tracker its package, and the
    lm-eval tasks of ``specs``' harness stages that are not polymnesia's must be in lm-eval's
    task index (a few seconds, so here rather than whenever a config is read; an unknown
    name would otherwise stop the run at its harness stage, after all its training)."""
    check_precision(cfg, device_type, f"config {source}")
    check_trackers(cfg, f"config {source}")
    for path, node in submodels(cfg):
        kernel = getattr(node, "attn_implementation", None)
        if isinstance(kernel, str):
            key = f"{path}.attn_implementation" if path else "attn_implementation"
            check_attention(kernel, device_type, f"config {source}: {key}")
    check_harness_names(specs or [])


def check_hub_models(cfg: Any, specs: list[Any], to_run: set[str], source: str) -> None:
    """Every Hub model that a stage to run (named in ``to_run``) loads is in the local
    Hugging Face cache, or the Hub answers: one line naming the key otherwise, before the
    data stage rather than after it. The Hub is probed (a TCP connection, 3 s at most) only
    when some id is not cached."""
    ids: dict[str, str] = {}
    for spec in specs:
        model = getattr(spec.params, "model", None)
        if spec.name not in to_run or not isinstance(model, ModelConfig):
            continue
        name = model.name_or_path
        if name and not is_model_folder(name) and not in_hub_cache(name):
            key = _key_of(cfg, model)
            ids.setdefault(name, f"{key}.name_or_path" if key else "name_or_path")
    offline = hub_offline(datasets=False)
    if not ids or (not offline and hub_reachable()):
        return
    name, key = next(iter(ids.items()))
    why = "HF_HUB_OFFLINE is set" if offline else "the Hugging Face Hub does not answer"
    raise ConfigError(
        f"config {source}: {key}: '{name}' is a Hub id with nothing in the local Hugging Face "
        f"cache, and {why}; download it where there is internet (huggingface-cli download "
        f"{name}) and copy the cache ($HF_HOME), or give a local model folder"
    )


def check_harness_names(specs: list[Any]) -> None:
    """The lm-eval tasks of ``specs``' harness stages that polymnesia does not ship must be in
    lm-eval's task index (read by ``run``'s preflight and by ``validate``)."""
    tasks = sorted(
        {t for spec in specs if spec.kind == "evaluate_harness" for t in spec.params.tasks}
    )
    if any(not is_shipped(t) for t in tasks):
        check_tasks(tasks, hub_offline(), verify_online=True)

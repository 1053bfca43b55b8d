"""The checks on a config's models and tokenizers before any stage runs (called by
:mod:`polymnesia.experiments.preflight`):

- :func:`check_model_folders`: each local model folder reads as a model
  (:func:`~polymnesia.models.folders.check_model_folder`: ``config.json``'s sizes, the
  safetensors headers, ``auto_map`` only with ``trust_remote_code``), and its sizes are
  returned for the next checks;
- :func:`check_tokenizers`: a loaded model's tokenizer is its own and fits its embedding rows;
- :func:`check_model_settings`: a LoRA rank fits the model's layers and a freezing
  ``pattern`` matches one of its weight matrices, where the model is known without a
  download (a preset, or a local folder's ``config.json`` built on the meta device by
  :func:`skeleton`: no memory, no weights);
- :func:`check_hub_models`: every Hub model a stage to run loads is in the local Hugging Face
  cache, or the Hub answers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from polymnesia.config.base import submodels
from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.experiments.two_phase.config import INSTRUCT
from polymnesia.hub import hub_offline, hub_reachable, in_hub_cache
from polymnesia.models import ModelConfig
from polymnesia.models.build import token_ids_needed
from polymnesia.models.folders import (
    TOKENIZER_FILES,
    FolderInfo,
    check_model_folder,
    has_tokenizer,
    is_model_folder,
)
from polymnesia.models.lora import LoraConfig, check_rank
from polymnesia.stages.instruct import InstructConfig
from polymnesia.tokenizers.bpe import load_tokenizer
from polymnesia.training.config import TrainConfig
from polymnesia.training.plugins import PluginOptions


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


def check_model_settings(cfg: Any) -> None:
    """A LoRA rank fits the models it adapts, and each training plugin's options fit the
    models it trains (each plugin's own checks: a freezing ``pattern`` matches a weight
    matrix), where the model is known without a download."""
    checks: list[tuple[str, list[Any], int | None, LoraConfig | None, PluginOptions | None]] = []
    models = _candidate_models(cfg)
    trained = [m for m in models if not isinstance(m, str)] or models
    for path, node in submodels(cfg):
        if isinstance(node, InstructConfig) and node.lora_rank is not None:
            checks.append((f"{path}.lora_rank", trained, node.lora_rank, node.lora, None))
        if isinstance(node, TrainConfig):
            for i, plugin in enumerate(node.plugins):
                if plugin.checks_model:
                    checks.append((f"{path}.plugins.{i}", models, None, None, plugin))
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
        for i, arm in enumerate(m.freezing):  # a freezing arm is the plugin's options
            if arm.checks_model:
                checks.append((f"mitigation.freezing.{i}", tuned, None, None, arm))
    built: dict[int, Any] = {}
    for key, targets, rank, lora, options in checks:
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
            if options is not None:
                try:
                    options.check_model(model)
                except ValueError as e:  # its message starts with the option's key
                    raise ConfigError(f"{key}.{e}; model: {_describe(target)}") from None


def _describe(model: Any) -> str:
    return model if isinstance(model, str) else model.describe()


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

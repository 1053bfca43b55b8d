"""Build, save and load decoder models in Hugging Face format (safetensors only)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import torch
from safetensors import SafetensorError

from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.io import atomic_dir
from polymnesia.models.anatomy import FAMILIES, not_applicable
from polymnesia.models.config import ModelConfig
from polymnesia.trust import remote_code


def build_model(cfg: ModelConfig, tokenizer: Any, seed: int = 0) -> torch.nn.Module:
    """A Mistral decoder from scratch sized by ``cfg`` with the tokenizer's vocabulary, or the Hub
    model.
    """
    if cfg.name_or_path:
        loaded = load_model(
            cfg.name_or_path,
            trust_remote_code=cfg.trust_remote_code,
            dtype=cfg.dtype,
            attn_implementation=cfg.attn_implementation,
        )
        if tokenizer is not None:
            name = getattr(tokenizer, "name_or_path", "") or "of this stage"
            check_tokenizer_fits(embedding_rows(loaded), tokenizer, cfg.name_or_path, str(name))
        return loaded
    from transformers import MistralConfig, MistralForCausalLM

    kwargs: dict[str, Any] = dict(cfg.dims())
    if cfg.attn_implementation is not None:
        kwargs["attn_implementation"] = cfg.attn_implementation
    conf = MistralConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=cfg.tie_word_embeddings,
        attention_dropout=cfg.dropout,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        sliding_window=None,
        initializer_range=0.02,
        **kwargs,
    )
    torch.manual_seed(seed)
    try:
        model = MistralForCausalLM(conf)
    except (ImportError, ValueError) as e:
        if cfg.attn_implementation is None:
            raise
        raise PolymnesiaError(
            f"cannot build the model with attn_implementation={cfg.attn_implementation!r}: "
            f"{str(e).strip().splitlines()[0]}"
        ) from None
    return model.to(getattr(torch, cfg.dtype))


def token_ids_needed(tokenizer: Any) -> int:
    """How many embedding rows the ids of ``tokenizer`` need: its length, or its largest id
    plus one where that is larger."""
    vocab = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    return max(len(tokenizer), max(vocab.values(), default=-1) + 1)


def check_tokenizer_fits(rows: int | None, tokenizer: Any, model: str, tokenizer_name: str) -> None:
    """One line when the ids of ``tokenizer`` (named ``tokenizer_name``) do not fit the
    ``rows`` embedding rows of ``model``: the model would index past its embedding matrix."""
    need = token_ids_needed(tokenizer)
    if rows is not None and need > rows:
        raise PolymnesiaError(
            f"the tokenizer {tokenizer_name} has ids up to {need - 1}, but model {model} has "
            f"{rows} embedding rows; a loaded model takes its own tokenizer: leave "
            "tokenizer.name_or_path unset (or point it at the model's folder); a new vocabulary "
            "goes through vocabulary expansion (adapt_vocabulary), which resizes the embeddings"
        )


def embedding_rows(model: torch.nn.Module) -> int | None:
    """The rows of a model's input embedding matrix (None if it has none to read)."""
    get = getattr(model, "get_input_embeddings", None)
    emb = get() if callable(get) else None
    rows = getattr(emb, "num_embeddings", None)
    return int(rows) if isinstance(rows, int) else None


def check_attention(kernel: str | None, device_type: str, where: str) -> None:
    """Refuse, in one line, an attention kernel this machine cannot run, before any stage
    runs (transformers would stop with a traceback once the model is built or trained, after
    the stages before it): FlashAttention-2 needs the ``flash-attn`` package and a CUDA GPU;
    FlexAttention has no backward pass on a CPU (torch raises at the first training step)."""
    import importlib.util

    if kernel == "flash_attention_2":
        needs = "the flash-attn package and a CUDA GPU"
        missing = [
            why
            for why, ok in (
                ("the package is missing", importlib.util.find_spec("flash_attn") is not None),
                ("there is no CUDA GPU", device_type == "cuda"),
            )
            if not ok
        ]
    elif kernel == "flex_attention":
        needs = "an accelerator (torch has no FlexAttention backward on a CPU)"
        missing = ["the stages run on the CPU"] if device_type == "cpu" else []
    else:
        return
    if missing:
        flex = kernel != "flex_attention" and device_type != "cpu"
        accepted = "sdpa, eager" + (", flex_attention" if flex else "")
        raise ConfigError(
            f"{where}={kernel} needs {needs}; here {' and '.join(missing)}; accepted here: "
            f"{accepted} or null (transformers' default)"
        )


def load_kwargs(dtype: str | None, attn_implementation: str | None) -> dict[str, Any]:
    """``from_pretrained`` keywords for a dtype name and an attention kernel.

    transformers >= 4.56 calls the dtype ``dtype`` (``torch_dtype`` before).
    """
    import transformers

    out: dict[str, Any] = {}
    if dtype is not None:
        major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
        key = "dtype" if (major, minor) >= (4, 56) else "torch_dtype"
        out[key] = getattr(torch, dtype)
    if attn_implementation is not None:
        out["attn_implementation"] = attn_implementation
    return out


def load_model(
    name_or_path: str | Path,
    *,
    trust_remote_code: bool = False,
    dtype: str | None = None,
    attn_implementation: str | None = None,
) -> torch.nn.Module:
    """Load a causal LM from a local folder (safetensors) or a Hub id, the same way, one-line
    errors.

    ``dtype`` (``float32``, ``bfloat16``, ``float16``; None: as saved) and
    ``attn_implementation`` (``eager``, ``sdpa``, ...; None: transformers'
    default) go to ``from_pretrained``. An encoder is refused in one line.
    """
    from transformers import AutoModelForCausalLM

    model = _load(AutoModelForCausalLM, name_or_path, trust_remote_code, dtype, attn_implementation)
    _refuse_encoder(model)
    return model


def load_encoder(
    name_or_path: str | Path,
    *,
    trust_remote_code: bool = False,
    dtype: str | None = None,
    attn_implementation: str | None = None,
) -> torch.nn.Module:
    """Load an encoder (XLM-R, BERT) with its masked-LM head, as :func:`load_model` loads a
    causal LM. The classification protocols (Mao et al. 2022 and Khelli et al. 2025 used XLM-R)
    start from it:
    their stages put a task head on its body. Anything that is not an encoder stops with one
    line."""
    from transformers import AutoModelForMaskedLM

    model = _load(AutoModelForMaskedLM, name_or_path, trust_remote_code, dtype, attn_implementation)
    if not is_encoder(model):
        raise not_applicable("loading as an encoder", model, "it is not an encoder")
    return model


def load_pretrained(
    name_or_path: str | Path,
    *,
    trust_remote_code: bool = False,
    dtype: str | None = None,
    attn_implementation: str | None = None,
) -> torch.nn.Module:
    """The model with the head of its pre-training objective: an encoder (read from its
    config, :func:`names_encoder`) with its masked-LM head (:func:`load_encoder`), anything
    else as a causal LM (:func:`load_model`)."""
    load = (
        load_encoder
        if names_encoder(name_or_path, trust_remote_code=trust_remote_code)
        else load_model
    )
    return load(
        name_or_path,
        trust_remote_code=trust_remote_code,
        dtype=dtype,
        attn_implementation=attn_implementation,
    )


def _load(
    auto: Any,
    name_or_path: str | Path,
    trust_remote_code: bool,
    dtype: str | None,
    attn_implementation: str | None,
) -> torch.nn.Module:
    """``auto.from_pretrained`` with safetensors for local folders and one-line errors."""
    path = Path(name_or_path).expanduser()
    local = path.exists()
    if not local and (str(name_or_path).startswith((".", "/")) or str(name_or_path).count("/") > 1):
        raise PolymnesiaError(f"model folder not found: {name_or_path}")
    try:
        return auto.from_pretrained(
            str(path) if local else str(name_or_path),
            trust_remote_code=remote_code(trust_remote_code, f"model '{name_or_path}'"),
            use_safetensors=True if local else None,
            **load_kwargs(dtype, attn_implementation),
        )
    except (ImportError, ValueError) as e:
        if attn_implementation is not None:
            raise PolymnesiaError(
                f"cannot load {name_or_path} with attn_implementation={attn_implementation!r}: "
                f"{_first_line(e)}"
            ) from None
        if isinstance(e, ImportError):
            raise
        raise PolymnesiaError(f"cannot load model {name_or_path}: {_first_line(e)}") from None
    except SafetensorError as e:
        raise PolymnesiaError(
            f"cannot load model {name_or_path}: its safetensors weights are damaged "
            f"({_first_line(e)})"
        ) from None
    except OSError as e:
        if local:
            raise PolymnesiaError(
                f"cannot load model from {name_or_path}: {str(e).splitlines()[0]}"
            ) from None
        raise PolymnesiaError(
            f"cannot load Hub model '{name_or_path}': the Hugging Face Hub is unreachable or the "
            "id is wrong; offline, build a model from a preset (model.preset) or point "
            "model.name_or_path at a local folder"
        ) from None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def names_encoder(name_or_path: str | Path, *, trust_remote_code: bool = False) -> bool:
    """Whether the model at ``name_or_path`` is an encoder, read from its config alone."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(
            str(name_or_path),
            trust_remote_code=remote_code(trust_remote_code, f"model '{name_or_path}'"),
        )
    except (OSError, ValueError):
        return False  # load_model says what is wrong, in one line
    return is_encoder(config)


def is_encoder(model_or_config: Any) -> bool:
    """True for a bidirectional encoder (BERT, RoBERTa, XLM-R): a model or its config."""
    config = getattr(model_or_config, "config", model_or_config)
    kind = str(getattr(config, "model_type", ""))
    return FAMILIES.get(kind) == "bert" and not getattr(config, "is_decoder", False)


def _refuse_encoder(model: torch.nn.Module) -> None:
    """An encoder (XLM-R, BERT) loads as a 'causal LM' with bidirectional attention: refuse it."""

    if is_encoder(model):
        raise not_applicable(
            "causal language modelling",
            model,
            "it is an encoder (bidirectional attention), so next-token training and perplexity "
            "would see the future; use it through the classification stages",
        )


@runtime_checkable
class Pretrained(Protocol):
    """A model that writes an HF folder: a transformers model, or a PEFT model (its adapter)."""

    def save_pretrained(self, save_directory: str | os.PathLike[str], **kwargs: Any) -> Any: ...


@runtime_checkable
class Embeds(Protocol):
    """A transformers model: its input embeddings are one matrix of token rows."""

    def get_input_embeddings(self) -> torch.nn.Embedding: ...


@runtime_checkable
class Resizable(Embeds, Protocol):
    """A transformers model whose token embeddings can be read and resized."""

    def get_output_embeddings(self) -> torch.nn.Linear | None: ...

    def resize_token_embeddings(self, new_num_tokens: int | None = None, **kwargs: Any) -> Any: ...


def save_pretrained(model: torch.nn.Module, folder: Path, **kwargs: Any) -> None:
    """``model.save_pretrained(folder, **kwargs)``; one line if the model cannot write one."""
    if not isinstance(model, Pretrained):
        raise PolymnesiaError(
            f"{type(model).__name__} has no save_pretrained: polymnesia saves transformers and "
            "PEFT models"
        )
    model.save_pretrained(folder, **kwargs)


def save_model(model: torch.nn.Module, path: Path) -> None:
    """Save in HF format with safetensors, atomically (a temp folder renamed into place)."""

    with atomic_dir(path) as tmp:
        save_pretrained(model, tmp, safe_serialization=True)


def count_parameters(model: torch.nn.Module, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)

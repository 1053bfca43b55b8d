"""Where the parts of a transformers model are, whatever its architecture.

Methods that touch particular parts of a model (embedding resets, frozen
embedding rows, layer freezing, LoRA, the per-language gradient step) find
them here instead of by Mistral's parameter names:

* embeddings through the model's own API (``get_input_embeddings`` /
  ``get_output_embeddings``), tied when both hold the same tensor;
* the shared body through ``base_model`` (the pretrained network without its
  task head), which PEFT wrappers are unwrapped to first;
* the transformer blocks: the ``ModuleList`` with ``config.num_hidden_layers``
  entries (``model.layers`` in Llama/Mistral/Qwen2/Gemma, ``transformer.h``
  in GPT-2, ``roberta.encoder.layer`` in RoBERTa/XLM-R);
* the attention projections by architecture family (:data:`ATTENTION`):
  Llama-style ``q_proj k_proj v_proj o_proj``, GPT-2's fused ``c_attn``
  (one ``Conv1D`` for q, k and v) and ``c_proj``, BERT-style
  ``query key value`` and ``attention.output.dense``.

A method that cannot apply to a model raises :class:`NotApplicable`: one line
naming the method, the architecture and what is missing.
"""

from __future__ import annotations

from typing import Any

import torch

from polymnesia.errors import PolymnesiaError

#: attention projections (role -> path inside one block) per architecture family
ATTENTION: dict[str, dict[str, str]] = {
    "llama": {
        "q": "self_attn.q_proj",
        "k": "self_attn.k_proj",
        "v": "self_attn.v_proj",
        "o": "self_attn.o_proj",
    },
    "gpt2": {"qkv": "attn.c_attn", "o": "attn.c_proj"},
    "bert": {
        "q": "attention.self.query",
        "k": "attention.self.key",
        "v": "attention.self.value",
        "o": "attention.output.dense",
    },
}
#: ``config.model_type`` -> family in :data:`ATTENTION`
FAMILIES: dict[str, str] = {
    **dict.fromkeys(
        ("llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "phi3", "olmo"),
        "llama",
    ),
    "gpt2": "gpt2",
    **dict.fromkeys(("bert", "roberta", "xlm-roberta", "camembert"), "bert"),
}
#: parameter-name patterns of embeddings (token, position, type) by architecture, for
#: safetensors folders scanned without a model: Llama-style, GPT-2, BERT/RoBERTa, T5/BART
EMBEDDING_PATTERNS = (
    r"(^|\.)embed_tokens\.",
    r"(^|\.)lm_head\.",
    r"(^|\.)wte\.",
    r"(^|\.)wpe\.",
    r"(^|\.)embeddings\.(word|position|token_type)_embeddings\.",
    r"(^|\.)embed_positions\.",
    r"(^|\.)shared\.",
)


class NotApplicable(PolymnesiaError):
    """A method cannot apply to a model: the message names method, architecture and what is
    missing.
    """


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The transformers model inside a PEFT wrapper (or the model itself)."""
    get = getattr(model, "get_base_model", None)
    inner = get() if callable(get) else model
    return inner if isinstance(inner, torch.nn.Module) else model


def architecture(model: torch.nn.Module) -> str:
    """``config.model_type`` (e.g. ``mistral``, ``gpt2``, ``xlm-roberta``), or the class name."""
    config = getattr(unwrap(model), "config", None)
    return str(getattr(config, "model_type", None) or type(unwrap(model)).__name__)


def describe(model: torch.nn.Module) -> str:
    inner = unwrap(model)
    return f"{type(inner).__name__} ({architecture(inner)})"


def not_applicable(method: str, model: torch.nn.Module, missing: str) -> NotApplicable:
    return NotApplicable(f"{method} cannot apply to {describe(model)}: {missing}")


def input_embeddings(model: torch.nn.Module, method: str) -> Any:
    """The token embedding module (``get_input_embeddings``) with a 2-D ``weight``."""
    inner = unwrap(model)
    get = getattr(inner, "get_input_embeddings", None)
    try:
        emb = get() if callable(get) else None
    except (NotImplementedError, AttributeError):
        emb = None
    weight = getattr(emb, "weight", None)
    if emb is None or not isinstance(weight, torch.Tensor) or weight.ndim != 2:
        raise not_applicable(
            method, model, "it has no input embedding matrix (get_input_embeddings)"
        )
    return emb


def output_embeddings(model: torch.nn.Module) -> Any:
    """The LM head (``get_output_embeddings``), or None (classifiers, encoders without one)."""
    get = getattr(unwrap(model), "get_output_embeddings", None)
    try:
        head = get() if callable(get) else None
    except (NotImplementedError, AttributeError):
        return None
    return head if isinstance(getattr(head, "weight", None), torch.Tensor) else None


def tied(model: torch.nn.Module) -> bool:
    """Whether the LM head is the input embedding matrix (same tensor)."""
    head = output_embeddings(model)
    get = getattr(unwrap(model), "get_input_embeddings", None)
    emb = get() if callable(get) else None
    return head is not None and emb is not None and head.weight is emb.weight


def body(model: torch.nn.Module, method: str) -> torch.nn.Module:
    """The shared pretrained network without its task head (``base_model``)."""
    inner = unwrap(model)
    prefix = getattr(inner, "base_model_prefix", "")
    found = getattr(inner, prefix, None) if prefix else None
    if not isinstance(found, torch.nn.Module):
        found = getattr(inner, "base_model", None)
    if not isinstance(found, torch.nn.Module) or found is inner:
        raise not_applicable(method, model, "it has no separate body (base_model) under its head")
    return found


def split_body_head(
    model: torch.nn.Module, method: str, trainable_only: bool = True
) -> tuple[list[tuple[str, torch.nn.Parameter]], list[tuple[str, torch.nn.Parameter]]]:
    """(body, head) named parameters of ``model`` in ``named_parameters`` order."""
    in_body = {id(p) for p in body(model, method).parameters()}
    shared: list[tuple[str, torch.nn.Parameter]] = []
    head: list[tuple[str, torch.nn.Parameter]] = []
    for name, p in model.named_parameters():
        if trainable_only and not p.requires_grad:
            continue
        (shared if id(p) in in_body else head).append((name, p))
    return shared, head


def blocks(model: torch.nn.Module, method: str) -> list[tuple[str, torch.nn.Module]]:
    """The transformer blocks, as ``(module name, block)`` in depth order."""
    config = getattr(unwrap(model), "config", None)
    n = getattr(config, "num_hidden_layers", None)
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) > 0 and len(module) == n:
            return [(f"{name}.{i}", block) for i, block in enumerate(module)]
    raise not_applicable(
        method, model, f"no list of {n} transformer blocks (config.num_hidden_layers) was found"
    )


def attention_roles(model: torch.nn.Module, method: str) -> dict[str, str]:
    """Role (q, k, v, o or the fused qkv) -> path of that projection inside a block."""
    family = FAMILIES.get(architecture(model))
    if family is None:
        known = ", ".join(sorted(FAMILIES))
        raise not_applicable(
            method,
            model,
            f"its attention projections are not known (known architectures: {known}); "
            "name the modules explicitly",
        )
    return ATTENTION[family]


def attention_projections(model: torch.nn.Module, method: str) -> dict[str, list[str]]:
    """Role -> full module names, one per block (e.g. ``model.layers.0.self_attn.q_proj``)."""
    roles = attention_roles(model, method)
    modules = dict(model.named_modules())
    out: dict[str, list[str]] = {role: [] for role in roles}
    for name, _ in blocks(model, method):
        for role, path in roles.items():
            full = f"{name}.{path}"
            if full not in modules:
                raise not_applicable(method, model, f"block {name} has no {path}")
            out[role].append(full)
    return out


def translate_targets(model: torch.nn.Module, names: list[str], method: str) -> list[str]:
    """Module names (or suffixes) to adapt in ``model``.

    Names found in the model are kept as given. Otherwise Llama's projection
    names (``q_proj k_proj v_proj o_proj``) are read as roles and translated
    to the architecture's own modules (q, k and v all map to GPT-2's fused
    ``c_attn``); any other missing name is one line.
    """
    found = [
        n for n in names if any(m == n or m.endswith("." + n) for m, _ in model.named_modules())
    ]
    if len(found) == len(names):
        return list(names)
    llama = {path.rsplit(".", 1)[-1]: role for role, path in ATTENTION["llama"].items()}
    missing = [n for n in names if n not in found]
    if any(n not in llama for n in missing):
        raise not_applicable(method, model, f"it has no module named {missing}")
    roles = attention_roles(model, method)
    attention_projections(model, method)  # every block has the projections
    out = list(found)
    for n in missing:
        role = llama[n]
        path = roles.get(role) or roles.get("qkv")
        if path is None:
            raise not_applicable(method, model, f"it has no attention projection for role {role}")
        if path not in out:
            out.append(path)
    return out


def matrix_width(module: torch.nn.Module) -> int:
    """The smaller dimension of a projection's weight (``nn.Linear`` or GPT-2's ``Conv1D``)."""
    weight: Any = getattr(module, "weight", None)
    if not isinstance(weight, torch.Tensor) or weight.ndim != 2:
        raise PolymnesiaError(f"{type(module).__name__} has no 2-D weight")
    return int(min(weight.shape))


def embedding_parameter_names(model: torch.nn.Module) -> set[str]:
    """Names of every embedding parameter (token, position, type) and of the LM head."""
    ids = {id(m.weight) for m in model.modules() if isinstance(m, torch.nn.Embedding)}
    head = output_embeddings(model)
    if head is not None:
        ids.add(id(head.weight))
    return {n for n, p in model.named_parameters() if id(p) in ids}

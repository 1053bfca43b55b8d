"""A model's shape for the memory planner (:class:`ModelShape`): widths, layers, heads,
vocabulary, and the sizes of its weight matrices, blocks, embeddings and head, read from a
transformers config or a polymnesia preset, without making a tensor."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from polymnesia.errors import ConfigError
from polymnesia.models.presets import PRESETS

#: the LoRA targets of polymnesia.models.lora.LoraConfig's default
LORA_DEFAULT = ("q_proj", "k_proj", "v_proj", "o_proj")


@dataclass(frozen=True)
class ModelShape:
    """The dimensions the planner needs of a decoder (or an encoder: ``gated_mlp=False``)."""

    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    vocab_size: int
    tied_embeddings: bool = False
    head_dim: int | None = None  # None: hidden_size // num_heads
    gated_mlp: bool = True  # SwiGLU (Llama, Mistral, Qwen2); False: up-projection + GELU (BERT)
    bias: bool = False  # biases on every linear layer (BERT, XLM-R)
    qkv_bias: bool = False  # biases on q, k, v only (Qwen2)
    lm_head: bool = True  # a vocabulary-wide LM head; False: a classifier of few outputs
    dropout: bool = False  # dropout in the blocks (BERT, XLM-R: 0.1)
    extra_params: int = 0  # position embeddings, pooler, classifier head, ...
    name: str = ""

    def __post_init__(self) -> None:
        for key in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "intermediate_size"):
            if getattr(self, key) <= 0:
                raise ConfigError(f"model shape: {key} must be positive, got {getattr(self, key)}")
        if self.vocab_size <= 0:
            raise ConfigError(f"model shape: vocab_size must be positive, got {self.vocab_size}")

    @classmethod
    def from_hf_config(cls, conf: Any, *, lm_head: bool = True, name: str = "") -> ModelShape:
        """From a transformers ``PretrainedConfig`` (Llama, Mistral, Qwen2, BERT/XLM-R, GPT-2
        names), read by attribute."""

        def get(*names: str, default: Any = None) -> Any:
            for n in names:
                v = getattr(conf, n, None)
                if v is not None:
                    return v
            return default

        hidden = int(get("hidden_size", "n_embd", "d_model"))
        heads = int(get("num_attention_heads", "n_head"))
        kind = str(get("model_type", default=""))
        encoder = kind in {"bert", "roberta", "xlm-roberta", "distilbert", "electra", "gpt2"}
        inter = get("intermediate_size", "n_inner", "ffn_dim")
        positions = 0
        if encoder:  # learned positions (and BERT's token types)
            positions = int(get("max_position_embeddings", "n_positions", default=0)) * hidden
            positions += int(get("type_vocab_size", default=0)) * hidden
        return cls(
            hidden_size=hidden,
            num_layers=int(get("num_hidden_layers", "n_layer")),
            num_heads=heads,
            num_kv_heads=int(get("num_key_value_heads", default=heads)),
            intermediate_size=int(inter) if inter else 4 * hidden,
            vocab_size=int(get("vocab_size")),
            tied_embeddings=bool(get("tie_word_embeddings", default=encoder)),
            head_dim=get("head_dim"),
            gated_mlp=not encoder,
            bias=encoder,
            qkv_bias=bool(get("attention_bias", default=kind in {"qwen2"})),
            lm_head=lm_head,
            dropout=float(get("hidden_dropout_prob", "resid_pdrop", default=0.0) or 0.0) > 0,
            extra_params=positions,
            name=name or str(get("_name_or_path", default="") or kind),
        )

    @classmethod
    def from_preset(
        cls, preset: str, vocab_size: int, *, tied: bool = False, **dims: int | None
    ) -> ModelShape:
        """A polymnesia preset (``polymnesia ls presets``) with its vocabulary; ``dims``
        overrides the preset's dimensions (``hidden_size=...``; None keeps the preset's)."""
        p = PRESETS.get(preset)
        d = {k: getattr(p, k) for k in p.__dataclass_fields__}
        d.update({k: v for k, v in dims.items() if v is not None})
        return cls(
            hidden_size=d["hidden_size"],
            num_layers=d["num_hidden_layers"],
            num_heads=d["num_attention_heads"],
            num_kv_heads=d["num_key_value_heads"],
            intermediate_size=d["intermediate_size"],
            vocab_size=vocab_size,
            tied_embeddings=tied,
            name=f"preset {preset}",
        )

    # -- sizes --------------------------------------------------------------------------------
    @property
    def q_width(self) -> int:
        """Heads x head_dim: the width of the queries (and of the repeated keys/values)."""
        return self.num_heads * (self.head_dim or self.hidden_size // self.num_heads)

    @property
    def kv_width(self) -> int:
        return self.num_kv_heads * (self.head_dim or self.hidden_size // self.num_heads)

    def matrices(self) -> dict[str, tuple[int, int]]:
        """The weight matrices of one block, by their Llama names: (in, out) features."""
        h, q, k, i = self.hidden_size, self.q_width, self.kv_width, self.intermediate_size
        out = {"q_proj": (h, q), "k_proj": (h, k), "v_proj": (h, k), "o_proj": (q, h)}
        if self.gated_mlp:
            out |= {"gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}
        else:
            out |= {"up_proj": (h, i), "down_proj": (i, h)}
        return out

    @property
    def block_params(self) -> int:
        """Parameters of one block: its matrices, biases and norms."""
        mats = self.matrices()
        n = sum(a * b for a, b in mats.values())
        if self.bias:
            n += sum(b for _, b in mats.values())
        elif self.qkv_bias:
            n += self.q_width + 2 * self.kv_width
        norms = 2 * self.hidden_size * (2 if self.bias else 1)  # LayerNorm has a bias too
        return n + norms

    @property
    def embedding_params(self) -> int:
        return self.vocab_size * self.hidden_size

    @property
    def head_params(self) -> int:
        """The LM head's own parameters (0 when tied or when the model is a classifier)."""
        return 0 if (self.tied_embeddings or not self.lm_head) else self.embedding_params

    @property
    def root_params(self) -> int:
        """Parameters outside the blocks: embeddings, final norm, head, extras."""
        norm = self.hidden_size * (2 if self.bias else 1)
        return self.embedding_params + self.head_params + norm + self.extra_params

    @property
    def total_params(self) -> int:
        return self.num_layers * self.block_params + self.root_params

    def lora_params(self, rank: int, modules: Iterable[str] = LORA_DEFAULT) -> int:
        """Adapter parameters of rank ``rank`` on the named matrices of every block."""
        mats = self.matrices()
        names = [m for m in modules if m in mats]
        return self.num_layers * sum(rank * (mats[m][0] + mats[m][1]) for m in names)

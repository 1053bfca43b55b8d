"""Stage ``adapt_vocabulary``: vocabulary expansion and new-row training (paper 000, section 3).

1. Train a byte-level BPE ``V^L`` on the adapting languages (temperature
   mixture) and merge it into the base vocabulary with
   :func:`polymnesia.tokenizers.merge.merge_tokenizers` (base ids kept, new
   tokens and merge rules appended; paper: 32,000 + 16,000 = 48,000). A base
   tokenizer of another family (a real model's SentencePiece BPE or Unigram,
   a tiktoken-style BPE) is expanded in its own family instead
   (:func:`polymnesia.tokenizers.expand.expand_tokenizer`).
2. Record the vocabulary sizes and each language's fertility (tokens per word
   and per byte) under the base and the merged tokenizer, as scores.
3. Resize the input embeddings and the LM head. New embedding rows are the
   mean of the base rows (``init="mean"``, default), or the mean of the base
   rows of the new token's base tokenization (``init="subtoken_mean"``).
   The LM head: ``head="reinit"`` (default) replaces it, as the paper does
   ("the language modeling head of M is replaced to be of the appropriate
   size |V_merged|"): every row, old and new, is drawn afresh from
   N(0, initializer_range) (the model config's, 0.02 for Mistral), bias
   zeroed. ``head="keep"`` keeps the old rows as a warm start (checked to
   survive the resize unchanged) and initialises the new rows like the
   embeddings. A head tied to the embeddings cannot be replaced without
   changing the frozen old embedding rows, so ``reinit`` refuses tied models.
4. Train only the new embedding rows and the (whole) LM head with the
   :mod:`~polymnesia.methods.frozen_rows` plugin: Transformer body and old
   rows bit-identical afterwards, with weight decay too.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

import torch
from pydantic import Field, model_validator

from polymnesia.config.base import StrictModel
from polymnesia.data.prepared import read_texts
from polymnesia.data.sampling import sample_mixture
from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.io import atomic_write_json
from polymnesia.methods.frozen_rows import FrozenRows
from polymnesia.models import count_parameters
from polymnesia.models.io import load_model_and_tokenizer, save_model_and_tokenizer
from polymnesia.pipeline.stage import STAGES, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import packed_mixture
from polymnesia.tokenizers.bpe import train_bpe_mixture
from polymnesia.tokenizers.expand import expand_tokenizer
from polymnesia.tokenizers.fertility import fertility
from polymnesia.tokenizers.merge import merge_tokenizers
from polymnesia.training.config import TrainConfig
from polymnesia.training.data import PackedLMData
from polymnesia.training.loop import train
from polymnesia.training.plugins import build_plugins

log = logging.getLogger(__name__)


class AdaptConfig(StrictModel):
    """Vocabulary expansion (paper 000, section 3: 32,000 + 16,000 = 48,000 tokens)."""

    new_vocab_size: int = Field(3000, ge=300, description="size of the adapting vocabulary V^L")
    max_new_tokens: int | None = Field(
        None, gt=0, description="cap on tokens appended by the merge"
    )
    init: Literal["mean", "subtoken_mean"] = Field("mean", description="initialisation of new rows")
    head: Literal["reinit", "keep"] = Field(
        "reinit",
        description="LM head: reinit (paper 000: replaced, every row drawn afresh) or keep "
        "(old rows kept as a warm start, new rows initialised like the embeddings)",
    )
    strict: bool = Field(
        False, description="refuse (rather than warn) adapting languages that overlap pretraining"
    )
    sample_texts: int = Field(8000, gt=0, description="texts drawn to train V^L")
    train: TrainConfig = Field(default_factory=TrainConfig)


class AdaptVocabularyParams(StrictModel):
    adapt: AdaptConfig = Field(default_factory=AdaptConfig)
    label: str = Field("adapted", description="the adapted model's name in tables (BA, AFA)")
    size: str | None = Field(None, description="size label of the model (scale sweeps)")
    adapting: list[str] = Field(
        min_length=1, description="languages the new vocabulary is learned on"
    )
    pretraining: list[str] = Field(default_factory=list, description="the base model's languages")
    temperature: float = Field(
        3.0, gt=0, description="language sampling temperature of V^L's mixture"
    )
    min_frequency: int = Field(2, ge=1)
    fertility_languages: dict[str, str] = Field(
        default_factory=dict, description="language -> group whose fertility is recorded"
    )
    fertility_texts: int = Field(200, gt=0, description="test texts per language for fertility")
    seed: int = 0

    @model_validator(mode="after")
    def _overlap(self) -> AdaptVocabularyParams:
        both = sorted(set(self.adapting) & set(self.pretraining))
        if both and self.adapt.strict:
            raise ValueError(
                f"adapting languages {both} are also pretraining languages; remove them or set strict: false"
            )
        return self


def check_resizable(model: torch.nn.Module) -> None:
    """One line if the model's embeddings cannot be resized."""
    ok = hasattr(model, "resize_token_embeddings") and hasattr(model, "get_input_embeddings")
    emb = model.get_input_embeddings() if ok else None  # type: ignore[operator]
    if emb is None or not isinstance(getattr(emb, "weight", None), torch.Tensor):
        raise PolymnesiaError(
            f"{type(model).__name__} has no resizable input embeddings; vocabulary expansion needs a "
            "transformers model with resize_token_embeddings (e.g. Mistral, Llama)"
        )


@torch.no_grad()
def resize_and_init(
    model: torch.nn.Module,
    merged: Any,
    base: Any,
    first_new_id: int,
    init: str,
    *,
    head: str,
    seed: int = 0,
) -> None:
    """Resize embeddings and head to ``len(merged)``, initialise new rows, keep or replace the head.

    See the module docstring (step 3) for ``init`` and ``head``; ``seed``
    draws the replaced head (the same on every process).
    """
    check_resizable(model)
    emb_old = model.get_input_embeddings().weight.detach().clone()  # type: ignore[operator]
    out = model.get_output_embeddings()  # type: ignore[operator]
    tied = out is not None and out.weight is model.get_input_embeddings().weight  # type: ignore[operator]
    if head == "reinit" and (out is None or tied):
        raise ConfigError(
            "head: reinit replaces the LM head, but this model's head is tied to its embeddings "
            "(or absent), whose old rows stay frozen; use head: keep for tied models"
        )
    head_old = out.weight.detach().clone() if out is not None and not tied else None
    try:
        model.resize_token_embeddings(len(merged), mean_resizing=False)  # type: ignore[operator]
    except (NotImplementedError, AttributeError, TypeError) as e:
        raise PolymnesiaError(
            f"cannot resize the embeddings of {type(model).__name__}: {str(e).splitlines()[0]}"
        ) from None
    n_base = emb_old.shape[0]
    emb = model.get_input_embeddings().weight  # type: ignore[operator]
    emb[:n_base] = emb_old
    _init_rows(emb, emb_old, merged, base, first_new_id, n_base, init)
    if head == "reinit":
        _reinit_head(model, seed)
    elif head_old is not None:
        w = model.get_output_embeddings().weight  # type: ignore[operator]
        w[:n_base] = head_old  # never let a resize re-initialise the old head rows
        _init_rows(w, head_old, merged, base, first_new_id, n_base, init)


def _reinit_head(model: torch.nn.Module, seed: int) -> None:
    """Draw every LM-head row from N(0, initializer_range) and zero its bias (paper 000: replaced)."""
    out = model.get_output_embeddings()  # type: ignore[operator]
    std = float(getattr(getattr(model, "config", None), "initializer_range", 0.02))
    gen = torch.Generator().manual_seed(seed)
    draw = torch.randn(tuple(out.weight.shape), generator=gen, dtype=torch.float32) * std
    out.weight.copy_(draw.to(out.weight.dtype))
    if getattr(out, "bias", None) is not None:
        torch.nn.init.zeros_(out.bias)


def _init_rows(
    w: torch.Tensor, old: torch.Tensor, merged: Any, base: Any, first: int, n_base: int, init: str
) -> None:
    mean = old[: min(n_base, first)].mean(dim=0)
    w[n_base:] = mean
    if init != "subtoken_mean":
        return
    for tid in range(first, w.shape[0]):
        text = merged.convert_tokens_to_string([merged.convert_ids_to_tokens(tid)])
        pieces = base(text, add_special_tokens=False)["input_ids"]
        if pieces:
            w[tid] = old[pieces].mean(dim=0)


def _own_byte_bpe(tokenizer: Any) -> bool:
    """polymnesia's own byte-level BPE (NFC + ByteLevel): expanded as before, merge rules only."""
    import json

    data = json.loads(tokenizer.backend_tokenizer.to_str())
    return (
        data["model"].get("type") == "BPE"
        and (data.get("normalizer") or {}).get("type") == "NFC"
        and (data.get("pre_tokenizer") or {}).get("type") == "ByteLevel"
    )


def _expand_in_family(base: Any, data: Any, texts: dict[str, list[str]], p: Any) -> Any:
    """Any other tokenizer (SentencePiece BPE or Unigram, tiktoken-style BPE): learn V^L in the
    base's own family and settings (:func:`polymnesia.tokenizers.expand.expand_tokenizer`),
    keeping the pretraining languages' tokenization (checked on their training texts)."""

    mixture = [t for _, t in sample_mixture(texts, p.temperature, p.adapt.sample_texts, p.seed)]
    base_texts = [t for lang in p.pretraining for t in read_texts(data, lang, "train", 500)]
    expansion = expand_tokenizer(
        base,
        mixture,
        p.adapt.new_vocab_size,
        base_texts=base_texts,
        max_new_tokens=p.adapt.max_new_tokens,
        min_frequency=p.min_frequency,
    )
    log.info("vocabulary expansion: %s", expansion.report.as_dict())
    return expansion.tokenizer, expansion.report


def fertility_scores(
    tokenizers: dict[str, Any],
    texts: dict[str, list[str]],
    groups: dict[str, str],
    p: AdaptVocabularyParams,
) -> list[Score]:
    out = []
    for lang, lang_texts in texts.items():
        for name, tok in tokenizers.items():
            f = fertility(tok, lang_texts)
            for metric in ("tokens_per_word", "tokens_per_byte"):
                out.append(
                    Score(
                        model=p.label,
                        lang=lang,
                        metric=f"fertility_{metric}",
                        value=f[metric],
                        task="fertility",
                        group=groups.get(lang),
                        size=p.size,
                        setting=name,
                    )
                )
    return out


@STAGES.register(
    "adapt_vocabulary",
    "train a BPE on the adapting languages, merge it, resize, train new rows + head (body frozen)",
)
class AdaptVocabulary(Stage):
    role = "training"
    version = "2"
    distributed = True
    resumable = True

    def run(self, ctx: StageContext) -> list[Score]:
        p: AdaptVocabularyParams = ctx.params
        if overlap := sorted(set(p.adapting) & set(p.pretraining)):
            log.warning("adapting languages %s were also pretraining languages", overlap)
        data = ctx.input("data")
        model, base = load_model_and_tokenizer(ctx.input("model") / "model")
        check_resizable(model)
        texts = {lang: read_texts(data, lang, "train") for lang in p.adapting}
        if _own_byte_bpe(base):
            new = train_bpe_mixture(
                texts,
                p.adapt.new_vocab_size,
                temperature=p.temperature,
                total=p.adapt.sample_texts,
                seed=p.seed,
                min_frequency=p.min_frequency,
            )
            merged, report = merge_tokenizers(base, new, max_new_tokens=p.adapt.max_new_tokens)
        else:
            merged, report = _expand_in_family(base, data, texts, p)
        if report.added == 0:
            raise ConfigError("the adapting vocabulary adds no new token to the base vocabulary")
        resize_and_init(
            model, merged, base, report.first_new_id, p.adapt.init, head=p.adapt.head, seed=p.seed
        )
        blocks = packed_mixture(
            data,
            merged,
            p.adapting,
            temperature=p.temperature,
            block_size=p.adapt.train.block_size,
            seed=p.seed,
        )
        plugin = FrozenRows(first_trainable_row=report.first_new_id)
        model, result = train(
            model,
            PackedLMData(blocks),
            p.adapt.train,
            ctx.out_dir,
            seed=p.seed,
            plugins=[plugin, *build_plugins(p.adapt.train.plugins, ctx.inputs)],
            tracker_name=ctx.spec.name,
        )
        for prm in model.parameters():
            prm.requires_grad_(True)
        scores = [
            Score(
                model=p.label,
                lang="all",
                metric="vocab_size",
                value=float(v),
                task="vocabulary",
                size=p.size,
                setting=k,
            )
            for k, v in (
                ("base", report.base_size),
                ("new", report.new_size),
                ("merged", report.merged_size),
            )
        ]
        ev = {
            lang: read_texts(data, lang, "test", p.fertility_texts)
            for lang in p.fertility_languages
        }
        scores += fertility_scores({"base": base, "merged": merged}, ev, p.fertility_languages, p)
        if ctx.is_main_process:
            save_model_and_tokenizer(model, merged, ctx.out_dir / "model")
            atomic_write_json(
                ctx.out_dir / "train_summary.json",
                {
                    "merge": report.as_dict(),
                    "steps": result.steps,
                    "engine": result.engine,
                    "final_loss": result.final_loss,
                    "seconds": round(result.seconds, 2),
                    "parameters": count_parameters(model),
                    "trainable_rows": len(merged) - report.first_new_id,
                    "head": p.adapt.head,
                },
            )
        return scores

"""Stage ``adapt_vocabulary``: vocabulary expansion and new-row training (Aggarwal et al. 2024,
section 3).

1. Train a byte-level BPE ``V^L`` on the adapting languages (temperature
   mixture) and merge it into the base vocabulary with
   :func:`polymnesia.tokenizers.merge.merge_tokenizers` (base ids kept, new
   tokens and merge rules appended; paper: 32,000 + 16,000 = 48,000). A base
   tokenizer of another family (a real model's SentencePiece BPE or Unigram,
   a tiktoken-style BPE) is expanded in its own family instead
   (:func:`polymnesia.tokenizers.expand.expand_tokenizer`).
2. Record the vocabulary sizes and each language's fertility (tokens per word
   and per byte) under the base and the merged tokenizer, as scores.
3. Resize the input embeddings and the LM head. The base vocabulary is
   ``len(base tokenizer)``: a matrix padded past it (Qwen2, Phi-3, OLMo-2)
   gives its padding rows to the new ids first and grows to the next multiple
   it was padded to only when they do not fit. New rows come from a registered
   initialisation (:mod:`polymnesia.models.new_tokens`, ``adapt.init``): the
   mean of the base rows (``mean``, default), the mean of the base rows of the
   new token's base tokenization (``subtoken_mean``), a multivariate normal
   around the mean (``normal``), FOCUS (``focus``) and Orthogonal Matching
   Pursuit (``omp``) over static embeddings learned here on the adapting
   languages' text, or trans-tokenization (``align``: IBM Model 1 alignments
   of verse-aligned text with the pretraining languages). Side data is kept in
   the stage's entry (``static_embeddings.safetensors``, ``alignment_counts.npz``).
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import scipy.sparse as sp
from pydantic import Field, field_validator, model_validator
from safetensors.torch import save_file

from polymnesia.config.base import StrictModel
from polymnesia.data.prepared import read_split, read_texts
from polymnesia.data.sampling import sample_mixture
from polymnesia.errors import ConfigError
from polymnesia.methods.frozen_rows import FrozenRows
from polymnesia.models.build import count_parameters
from polymnesia.models.io import load_model_and_tokenizer, save_model_and_tokenizer
from polymnesia.models.new_tokens import (
    INITS,
    Alignment,
    StaticEmbeddings,
    ibm1_alignment,
    static_embeddings,
)
from polymnesia.models.resize import check_resizable, resize_and_init
from polymnesia.pipeline.stage import STAGES, Artifact, Provenance, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import (
    DATA,
    MODEL,
    packed_mixture,
    plugin_inputs,
    train_in_stage,
    train_summary,
    write_train_summary,
)
from polymnesia.tokenizers.bpe import train_bpe_mixture
from polymnesia.tokenizers.encode import token_ids
from polymnesia.tokenizers.expand import expand_tokenizer
from polymnesia.tokenizers.fertility import fertility
from polymnesia.tokenizers.merge import merge_tokenizers
from polymnesia.training.config import TrainConfig
from polymnesia.training.data import PackedLMData

log = logging.getLogger(__name__)


class AdaptConfig(StrictModel):
    """Vocabulary expansion (Aggarwal et al. 2024, section 3: 32,000 + 16,000 = 48,000 tokens)."""

    new_vocab_size: int = Field(3000, ge=300, description="size of the adapting vocabulary V^L")
    max_new_tokens: int | None = Field(
        None, gt=0, description="cap on tokens appended by the merge"
    )
    init: str = Field(
        "mean",
        description="initialisation of new rows: a registered name (polymnesia ls inits): mean, "
        "subtoken_mean, normal, focus, omp, align",
    )
    head: Literal["reinit", "keep"] = Field(
        "reinit",
        description="LM head: reinit (Aggarwal et al. 2024: replaced, every row drawn afresh) or "
        "keep (old rows kept as a warm start, new rows initialised like the embeddings)",
    )
    strict: bool = Field(
        False, description="refuse (rather than warn) adapting languages that overlap pretraining"
    )
    sample_texts: int = Field(8000, gt=0, description="texts drawn to train V^L")
    train: TrainConfig = Field(default_factory=TrainConfig)

    @field_validator("init")
    @classmethod
    def _known_init(cls, v: str) -> str:
        if v not in INITS:
            raise ValueError(f"unknown init '{v}'; accepted: {', '.join(INITS.names())}")
        return v


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
                f"adapting languages {both} are also pretraining languages; remove them or set "
                "strict: false"
            )
        needs_base_text = INITS.get(self.adapt.init).needs & {"alignment", "source_static"}
        if needs_base_text and not self.pretraining:
            raise ValueError(
                f"init '{self.adapt.init}' aligns the adapting languages' text with the base "
                "model's languages, but no pretraining language is given"
            )
        return self


#: side data of the initialisations that need it: static embeddings (focus, omp) of this many
#: dimensions over a window of this many tokens each side; IBM Model 1 EM rounds and the verses
#: per (pretraining, adapting) language pair it aligns (align)
STATIC_DIM = 64
STATIC_WINDOW = 4
ALIGN_ROUNDS = 5
ALIGN_MAX_VERSES = 4000


def verse_pairs(
    data: Any, sources: list[str], targets: list[str], limit: int = ALIGN_MAX_VERSES
) -> list[tuple[str, str]]:
    """(source text, target text) of train records sharing an aligned id, at most ``limit``
    per language pair, in the target's order."""
    pairs: list[tuple[str, str]] = []
    for tgt in targets:
        tgt_records = read_split(data, tgt, "train")
        for src in sources:
            by_id = {r["id"]: r["text"] for r in read_split(data, src, "train")}
            found = [(by_id[r["id"]], r["text"]) for r in tgt_records if r["id"] in by_id]
            pairs += found[:limit]
    return pairs


def side_data(
    init: str, base: Any, merged: Any, data: Any, p: AdaptVocabularyParams
) -> tuple[StaticEmbeddings | None, Alignment | None]:
    """Static embeddings of the adapting languages and alignments with the pretraining
    languages, for the initialisations that need them (one line when the data lacks them)."""
    needs = INITS.get(init).needs
    static = alignment = None
    if "static" in needs:
        texts = [t for lang in p.adapting for t in read_texts(data, lang, "train")]
        if not texts:
            raise ConfigError(
                f"init '{init}' learns static embeddings on the adapting languages' text, but "
                f"{', '.join(p.adapting)} have no train text"
            )
        static = static_embeddings(
            token_ids(merged, texts), len(merged), dim=STATIC_DIM, window=STATIC_WINDOW, seed=p.seed
        )
        log.info("static embeddings: %d of %d tokens seen", int(static.known().sum()), len(merged))
    if "alignment" in needs:
        pairs = verse_pairs(data, p.pretraining, p.adapting)
        if not pairs:
            raise ConfigError(
                f"init '{init}' needs parallel text, but no train record of "
                f"{', '.join(p.adapting)} shares an aligned id with {', '.join(p.pretraining)}"
            )
        src = token_ids(base, [a for a, _ in pairs])
        tgt = token_ids(merged, [b for _, b in pairs])
        alignment = ibm1_alignment(
            list(zip(src, tgt, strict=True)), len(base), len(merged), rounds=ALIGN_ROUNDS
        )
        log.info("alignments: %d verse pairs, %d links", len(pairs), alignment.counts.nnz)
    return static, alignment


def source_side_data(
    init: str, base: Any, data: Any, p: AdaptVocabularyParams
) -> StaticEmbeddings | None:
    """Static embeddings of the pretraining languages' text under the base tokenizer, for the
    initialisations that align them with the new language's (``wechsel``)."""
    if "source_static" not in INITS.get(init).needs:
        return None
    texts = [t for lang in p.pretraining for t in read_texts(data, lang, "train")]
    if not texts:
        raise ConfigError(
            f"init '{init}' learns static embeddings on the pretraining languages' text, but "
            f"{', '.join(p.pretraining)} have no train text"
        )
    return static_embeddings(
        token_ids(base, texts), len(base), dim=STATIC_DIM, window=STATIC_WINDOW, seed=p.seed
    )


def save_side_data(
    out_dir: Any, static: StaticEmbeddings | None, alignment: Alignment | None
) -> None:
    """Keep the side data in the stage's entry (cached with it) for inspection and reuse."""
    if static is not None:
        save_file(
            {"vectors": static.vectors.contiguous(), "counts": static.counts.contiguous()},
            str(out_dir / "static_embeddings.safetensors"),
        )
    if alignment is not None:
        sp.save_npz(out_dir / "alignment_counts.npz", alignment.counts)


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


def expand_vocabulary(base: Any, data: Path, p: AdaptVocabularyParams) -> tuple[Any, Any]:
    """The merged tokenizer and the merge report of the adapting languages' texts (the
    ``static_embeddings`` stage merges exactly as this stage does)."""
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
    return merged, report


@STAGES.register(
    "adapt_vocabulary",
    "train a BPE on the adapting languages, merge it, resize, train new rows + head (body frozen)",
)
class AdaptVocabulary(Stage[AdaptVocabularyParams]):
    category = "training"
    version = "3"  # 3: padded embedding matrices (issue 26)
    distributed = True
    resumable = True
    inputs = (DATA, MODEL)
    outputs = (Artifact.MODEL,)

    @classmethod
    def named_inputs(cls, params: AdaptVocabularyParams) -> Sequence[str]:
        return plugin_inputs(params.adapt.train.plugins)

    @classmethod
    def provenance(cls, params: AdaptVocabularyParams) -> Provenance:
        """For a model card: the adapting languages the new vocabulary is learned on."""
        return Provenance(tuple(params.adapting))

    def run(self, ctx: StageContext[AdaptVocabularyParams]) -> list[Score]:
        p = ctx.params
        if overlap := sorted(set(p.adapting) & set(p.pretraining)):
            log.warning("adapting languages %s were also pretraining languages", overlap)
        data = ctx.input(DATA)
        model, base = load_model_and_tokenizer(ctx.input(MODEL) / "model")
        check_resizable(model)
        merged, report = expand_vocabulary(base, data, p)
        static, alignment = side_data(p.adapt.init, base, merged, data, p)
        source_static = source_side_data(p.adapt.init, base, data, p)
        resize_and_init(
            model,
            merged,
            base,
            report.first_new_id,
            p.adapt.init,
            head=p.adapt.head,
            seed=p.seed,
            static=static,
            alignment=alignment,
            source_static=source_static,
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
        done = train_in_stage(
            ctx, model, PackedLMData(blocks), p.adapt.train, seed=p.seed, before=[plugin]
        )
        model = done.model
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
            save_side_data(ctx.out_dir, static, alignment)
        write_train_summary(
            ctx,
            train_summary(
                done.result,
                merge=report.as_dict(),
                parameters=count_parameters(model),
                trainable_rows=len(merged) - report.first_new_id,
                head=p.adapt.head,
                init=p.adapt.init,
            ),
        )
        return scores

"""Stage ``static_embeddings``: the expanded vocabulary and the side data of the new-token
initialisations, computed once and reused by every arm (issue 26).

From the prepared data and the base tokenizer it learns the adapting vocabulary and merges it
exactly as ``adapt_vocabulary`` does (:func:`expand_vocabulary`: the same BPE, merge and
family expansion, with the same parameters), then computes what the chosen initialisations
need (:mod:`polymnesia.models.new_tokens`):

* ``static``: static embeddings of the merged vocabulary on the adapting languages' train text
  (``focus``, ``omp``, ``wechsel``);
* ``source_static``: static embeddings of the base vocabulary on the pretraining languages'
  train text (``wechsel``);
* ``alignment``: IBM Model 1 counts between the pretraining languages' verses (base tokenizer)
  and the adapting languages' (merged tokenizer) (``align``).

It writes ``tokenizer/`` (the merged tokenizer), ``static_embeddings.safetensors``,
``source_static_embeddings.safetensors``, ``alignment_counts.npz`` (those asked for) and
``vocabulary.json`` (the merge report and the seconds each part took). It takes the base
tokenizer, not a model, so every base model pretrained with that tokenizer (standard
pretraining and active forgetting alike) and every initialisation share one entry;
:func:`load_side_data` reads it back.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import scipy.sparse as sp
from pydantic import Field
from safetensors.torch import load_file, save_file

from polymnesia.config.base import StrictModel
from polymnesia.errors import ConfigError, DataError
from polymnesia.io import atomic_write_json
from polymnesia.models.new_tokens import INITS, Alignment, StaticEmbeddings
from polymnesia.pipeline.stage import STAGES, Artifact, Role, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.adapt_vocabulary import (
    AdaptConfig,
    AdaptVocabularyParams,
    expand_vocabulary,
    side_data,
    source_side_data,
)
from polymnesia.stages.common import DATA, TOKENIZER
from polymnesia.tokenizers.bpe import load_tokenizer, save_tokenizer

log = logging.getLogger(__name__)

SideKind = Literal["static", "source_static", "alignment"]
SIDE_KINDS: tuple[SideKind, ...] = ("static", "source_static", "alignment")

STATIC_FILE = "static_embeddings.safetensors"
SOURCE_STATIC_FILE = "source_static_embeddings.safetensors"
ALIGNMENT_FILE = "alignment_counts.npz"
SUMMARY_FILE = "vocabulary.json"
#: the input role of a stage that reads a ``static_embeddings`` entry
VOCABULARY = Role("vocabulary", SUMMARY_FILE)


class VocabularySection(StrictModel):
    """The adapting vocabulary V^L merged into the base vocabulary (``adapt_vocabulary``'s keys)."""

    new_vocab_size: int = Field(3000, ge=300, description="size of the adapting vocabulary V^L")
    max_new_tokens: int | None = Field(
        None, gt=0, description="cap on tokens appended by the merge"
    )
    sample_texts: int = Field(8000, gt=0, description="texts drawn to train V^L")


class StaticEmbeddingsParams(StrictModel):
    vocabulary: VocabularySection = Field(default_factory=VocabularySection)
    adapting: list[str] = Field(min_length=1, description="the new languages")
    pretraining: list[str] = Field(default_factory=list, description="the base model's languages")
    temperature: float = Field(3.0, gt=0, description="language sampling temperature of V^L")
    min_frequency: int = Field(2, ge=1)
    needs: list[SideKind] = Field(
        default_factory=list, description="side data to compute: static, source_static, alignment"
    )
    seed: int = 0


def needs_of(inits: list[str]) -> list[SideKind]:
    """The side data the initialisations ``inits`` need, in a fixed order."""
    wanted = {n for init in inits for n in INITS.get(init).needs}
    return [k for k in SIDE_KINDS if k in wanted]


def adapt_params(p: StaticEmbeddingsParams, init: str = "mean") -> AdaptVocabularyParams:
    """``adapt_vocabulary``'s parameters for the same expansion (what its helpers read)."""
    v = p.vocabulary
    return AdaptVocabularyParams(
        adapt=AdaptConfig(
            new_vocab_size=v.new_vocab_size,
            max_new_tokens=v.max_new_tokens,
            sample_texts=v.sample_texts,
            init=init,
        ),
        adapting=p.adapting,
        pretraining=p.pretraining,
        temperature=p.temperature,
        min_frequency=p.min_frequency,
        seed=p.seed,
    )


@dataclass(frozen=True)
class SideData:
    """What a ``static_embeddings`` entry holds."""

    merged: Any
    first_new_id: int
    static: StaticEmbeddings | None
    source_static: StaticEmbeddings | None
    alignment: Alignment | None


def _save_static(st: StaticEmbeddings, path: Path) -> None:
    save_file({"vectors": st.vectors.contiguous(), "counts": st.counts.contiguous()}, str(path))


def _load_static(path: Path) -> StaticEmbeddings | None:
    if not path.exists():
        return None
    t = load_file(str(path))
    return StaticEmbeddings(t["vectors"], t["counts"])


def load_side_data(folder: Path) -> SideData:
    """Read a ``static_embeddings`` entry back."""
    try:
        summary = json.loads((folder / SUMMARY_FILE).read_text(encoding="utf-8"))
        first = int(summary["merge"]["first_new_id"])
    except (OSError, ValueError, KeyError, TypeError):
        raise DataError(
            f"{folder} holds no readable {SUMMARY_FILE}; rerun static_embeddings"
        ) from None
    align = folder / ALIGNMENT_FILE
    return SideData(
        merged=load_tokenizer(str(folder / "tokenizer")),
        first_new_id=first,
        static=_load_static(folder / STATIC_FILE),
        source_static=_load_static(folder / SOURCE_STATIC_FILE),
        alignment=Alignment(sp.csr_matrix(sp.load_npz(align))) if align.exists() else None,
    )


def base_tokenizer(folder: Path) -> Any:
    """The tokenizer of an upstream entry: its ``tokenizer/``, else its model folder's."""
    sub = folder / "tokenizer"
    return load_tokenizer(str(sub if sub.is_dir() else folder / "model"))


@STAGES.register(
    "static_embeddings",
    "merge the adapting vocabulary; static embeddings and alignments for new-token inits",
)
class StaticEmbeddingsStage(Stage[StaticEmbeddingsParams]):
    category = "data"
    version = "1"
    inputs = (DATA, TOKENIZER)
    outputs = (Artifact.TOKENIZER, SUMMARY_FILE)

    def run(self, ctx: StageContext[StaticEmbeddingsParams]) -> list[Score]:
        p = ctx.params
        data = ctx.input(DATA)
        base = base_tokenizer(ctx.input(TOKENIZER))
        ap = adapt_params(p)
        t = time.perf_counter()
        merged, report = expand_vocabulary(base, data, ap)
        seconds = {"vocabulary": round(time.perf_counter() - t, 2)}
        static = source = alignment = None
        if "static" in p.needs:
            t = time.perf_counter()
            static, _ = side_data("focus", base, merged, data, ap)
            seconds["static"] = round(time.perf_counter() - t, 2)
        if "source_static" in p.needs:
            t = time.perf_counter()
            source = source_side_data("wechsel", base, data, adapt_params(p, "wechsel"))
            seconds["source_static"] = round(time.perf_counter() - t, 2)
        if "alignment" in p.needs:
            if not p.pretraining:
                raise ConfigError("alignments need pretraining languages to align with; none given")
            t = time.perf_counter()
            _, alignment = side_data("align", base, merged, data, adapt_params(p, "align"))
            seconds["alignment"] = round(time.perf_counter() - t, 2)
        log.info("static_embeddings: %s", seconds)
        if ctx.is_main_process:
            save_tokenizer(merged, ctx.out_dir / "tokenizer")
            if static is not None:
                _save_static(static, ctx.out_dir / STATIC_FILE)
            if source is not None:
                _save_static(source, ctx.out_dir / SOURCE_STATIC_FILE)
            if alignment is not None:
                sp.save_npz(ctx.out_dir / ALIGNMENT_FILE, alignment.counts)
            atomic_write_json(
                ctx.out_dir / SUMMARY_FILE,
                {"merge": report.as_dict(), "needs": list(p.needs), "seconds": seconds},
            )
        counts = {"base": len(base), "merged": len(merged), "added": report.added}
        return [
            Score(
                model="vocabulary",
                lang="all",
                metric="vocab_size",
                value=float(v),
                task="vocabulary",
                setting=k,
                seed=p.seed,
            )
            for k, v in counts.items()
        ]

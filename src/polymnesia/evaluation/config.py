"""The evaluation sections: the keys every protocol's ``evaluation`` section shares
(:class:`EvaluationSection`, :class:`TextEvaluation`) and per-language likelihood evaluation
(:class:`EvalConfig`: perplexity, bits per byte)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from polymnesia.config.base import NOT_FINGERPRINTED, StrictModel
from polymnesia.runtime import Precision

PRECISION_HELP = (
    "inference precision: no (float32), bf16 or fp16 (the model is cast on the device; "
    "YAML's bare no/false mean no)"
)


def precision_field() -> Any:
    """The ``precision`` field of every model-running stage's parameters (default float32)."""
    return Field("no", description=PRECISION_HELP)


def no_is_false(v: object) -> object:
    """YAML reads a bare ``no`` as False: accept it as the precision ``no``."""
    return "no" if v is False else v


#: a stage parameter naming its inference precision (``no`` also read from YAML's false)
InferencePrecision = Annotated[Precision, BeforeValidator(no_is_false)]


class EvaluationSection(StrictModel):
    """What every protocol's ``evaluation`` section has: the inference precision of its
    model-running evaluation stages. Sections that score texts add :class:`TextEvaluation`'s
    keys; each key is declared once, here, under one name in every protocol."""

    precision: InferencePrecision = precision_field()


class TextEvaluation(EvaluationSection):
    """An evaluation that scores test texts (or labelled examples) per language in batches:
    ``lifelong``'s ``evaluation`` section, and the base of ``language_modeling``'s,
    ``active_forgetting``'s and ``lf_mlf``'s."""

    batch_size: int = Field(64, gt=0, description="texts (examples) per forward pass")
    max_texts_per_lang: int | None = Field(
        None, gt=0, description="cap on test texts (examples) per language; null: all prepared"
    )


class EvalConfig(TextEvaluation):
    """Per-language likelihood evaluation (perplexity, bits per byte)."""

    split: str = Field("test", pattern="^(validation|test)$")
    max_length: int = Field(256, gt=1)
    headline: str = Field(
        "bits_per_byte",
        pattern="^(bits_per_byte|perplexity)$",
        description="metric of the headline table (bits per byte compares vocabularies fairly)",
        json_schema_extra=NOT_FINGERPRINTED,
    )

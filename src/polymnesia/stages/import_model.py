"""Stage ``import_model``: a model that polymnesia did not train (a local HF folder or a Hub id,
e.g. Mistral-7B as a base, Mistral-7B-Instruct as an off-the-shelf Phase 1 model, or XLM-R as
the body of the classification protocols) copied into a stage folder (``model/``: safetensors
weights and tokenizer), so every later stage reads it like any other model stage's output.
Decoders are loaded as causal LMs, encoders (BERT, RoBERTa, XLM-R) with their masked-LM head.

``base.pretrain: false`` in a protocol's base section makes this stage the ``pretrain`` stage
(:func:`polymnesia.experiments.shared.base_stages`)."""

from __future__ import annotations

from pydantic import Field

from polymnesia.config.base import StrictModel
from polymnesia.errors import ConfigError
from polymnesia.models import ModelConfig
from polymnesia.models.build import check_tokenizer_fits, embedding_rows, load_pretrained
from polymnesia.models.io import save_model_and_tokenizer
from polymnesia.pipeline.stage import (
    STAGES,
    Artifact,
    Provenance,
    Stage,
    StageContext,
    named_models,
)
from polymnesia.results import Score
from polymnesia.tokenizers.bpe import load_tokenizer


class ImportModelParams(StrictModel):
    model: ModelConfig = Field(description="a model section whose name_or_path names the model")
    tokenizer: str | None = Field(None, description="its tokenizer (default: the model's own)")


@STAGES.register(
    "import_model", "an off-the-shelf model (local folder or Hub id) as a stage folder"
)
class ImportModel(Stage[ImportModelParams]):
    category = "data"
    version = "2"
    inputs = ()
    outputs = (Artifact.MODEL,)

    @classmethod
    def provenance(cls, params: ImportModelParams) -> Provenance:
        """For a model card: the model it imports."""
        return Provenance(base_models=named_models(params.model.name_or_path))

    def run(self, ctx: StageContext[ImportModelParams]) -> list[Score]:
        p = ctx.params
        m = p.model
        if m.name_or_path is None:
            raise ConfigError("import_model needs model.name_or_path (a folder or a Hub id)")
        model = load_pretrained(
            m.name_or_path,
            trust_remote_code=m.trust_remote_code,
            dtype=m.dtype,
            attn_implementation=m.attn_implementation,
        )
        tok = load_tokenizer(p.tokenizer or m.name_or_path)
        check_tokenizer_fits(embedding_rows(model), tok, m.name_or_path, p.tokenizer or "its own")
        save_model_and_tokenizer(model, tok, ctx.out_dir / "model")
        return []

"""Stage ``representation_drift``: how Phase 2 moved a model's English representations
(the two-phase CFT paper, section 4.4: Figure 1's t-SNE and Figure 2's per-layer covariance change).

Inputs: ``reference`` (the model before, e.g. Phase 1), ``model_0``, ``model_1``,
... (the models after, labelled by ``labels``) and ``data`` (prompts: English
test texts of the prepared data, the offline stand-in for MT-Bench). Every
model reads the same ``prompts`` texts; per model ``X`` is the layer-by-
hidden-size matrix of mean hidden activations
(:func:`polymnesia.evaluation.embeddings.layer_mean_states`, then
:func:`polymnesia.metrics.drift.mean_activations`). Scores: the covariance drift
of each model against the reference (``covariance_drift``) and its per-layer
terms (``layer_covariance_drift``, ``step`` = layer). ``states.npz`` keeps every
``X`` and ``tsne.json`` the 2-D t-SNE (scikit-learn) of all models' layer rows,
for Figure 1.
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import numpy as np
from pydantic import Field
from sklearn.manifold import TSNE

from polymnesia.config.base import StrictModel
from polymnesia.data.prepared import read_texts
from polymnesia.errors import ConfigError
from polymnesia.evaluation.config import InferencePrecision, precision_field
from polymnesia.evaluation.embeddings import folder_layer_states
from polymnesia.io import atomic_write_bytes, atomic_write_json
from polymnesia.metrics.drift import covariance_drift, layerwise_covariance_drift, mean_activations
from polymnesia.pipeline.stage import STAGES, Artifact, Role, Stage, StageContext
from polymnesia.results import Score
from polymnesia.stages.common import DATA, MODELS

#: the model the others' drift is measured from (the two-phase CFT paper: the Phase 1 model)
REFERENCE = Role("reference", Artifact.MODEL)


class DriftConfig(StrictModel):
    """The prompts every model reads (paper: MT-Bench, 80 English prompts)."""

    language: str = Field("en", description="language of the prompts")
    prompts: int = Field(80, gt=1, description="test texts read by every model")
    max_length: int = Field(128, gt=2)
    include_embeddings: bool = Field(
        False, description="count the embedding output as layer 0 (the paper: decoder layers)"
    )


class DriftParams(StrictModel):
    drift: DriftConfig = Field(default_factory=DriftConfig)
    reference_label: str = Field(description="the reference model's name (Phase 1)")
    labels: list[str] = Field(min_length=1, description="names of model_0, model_1, ...")
    precision: InferencePrecision = precision_field()
    seed: int = 0


def tsne_points(states: dict[str, np.ndarray], seed: int) -> dict[str, list[list[float]]]:
    """2-D t-SNE of every model's layer rows together (one point per model and layer)."""
    names = list(states)
    rows = np.concatenate([states[n] for n in names])
    perplexity = float(max(1.0, min(30.0, (len(rows) - 1) / 3)))
    xy = TSNE(n_components=2, perplexity=perplexity, random_state=seed, init="pca").fit_transform(
        rows.astype(np.float64)
    )
    out, start = {}, 0
    for n in names:
        out[n] = xy[start : start + len(states[n])].tolist()
        start += len(states[n])
    return out


@STAGES.register(
    "representation_drift",
    "covariance change of mean hidden activations per layer (the two-phase CFT paper)",
)
class RepresentationDrift(Stage[DriftParams]):
    category = "analysis"
    version = "1"
    inputs = (DATA, REFERENCE, MODELS)
    outputs = ("states.npz", "tsne.json")

    @classmethod
    def named_inputs(cls, params: DriftParams) -> Sequence[str]:
        return [MODELS(i) for i in range(len(params.labels))]  # one model per label

    def run(self, ctx: StageContext[DriftParams]) -> list[Score]:
        p = ctx.params
        d = p.drift
        texts = read_texts(ctx.input(DATA), d.language, "test", d.prompts)
        if len(texts) < 2:
            raise ConfigError(f"representation drift needs >= 2 {d.language} test texts")
        folders = {p.reference_label: ctx.input(REFERENCE)}
        folders.update({lab: ctx.input(MODELS(i)) for i, lab in enumerate(p.labels)})
        states = {
            name: mean_activations(
                folder_layer_states(
                    f / "model",
                    texts,
                    max_length=d.max_length,
                    include_embeddings=d.include_embeddings,
                    precision=p.precision,
                )
            )
            for name, f in folders.items()
        }
        ref = states[p.reference_label]
        scores: list[Score] = []
        for name in p.labels:
            X = states[name]
            extra = {"reference": p.reference_label, "prompts": len(texts)}
            scores.append(
                Score(
                    model=name,
                    lang=d.language,
                    metric="covariance_drift",
                    value=covariance_drift(ref, X),
                    task="drift",
                    extra=extra,
                )
            )
            for layer, v in enumerate(layerwise_covariance_drift(ref, X)):
                scores.append(
                    Score(
                        model=name,
                        lang=d.language,
                        metric="layer_covariance_drift",
                        value=float(v),
                        task="drift",
                        step=layer,
                        extra=extra,
                    )
                )
        buf = io.BytesIO()
        np.savez(buf, allow_pickle=False, **{k.replace(" ", "_"): v for k, v in states.items()})
        atomic_write_bytes(ctx.out_dir / "states.npz", buf.getvalue())
        atomic_write_json(ctx.out_dir / "tsne.json", tsne_points(states, p.seed))
        return scores

"""The two-phase CFT paper as the paper says it (issue 29, item 3): LF_H1 freezes whole layers, the
hidden-state DES embedder gets its model, Figures 1-2 need 3 layers and use integer ticks,
and EA and MA are each measured on at least three tasks that Phase 2 does not train."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from polymnesia.experiments.base import EXPERIMENTS
from polymnesia.experiments.loading import load_config
from polymnesia.experiments.shared import PRETRAIN
from polymnesia.experiments.two_phase.figures import MIN_LAYERS, figures, layer_curves
from polymnesia.reports.render import Report
from polymnesia.results import Score, StageRecord

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "configs" / "two_phase_smoke.yaml"
SHIPPED = ROOT / "configs" / "two_phase.yaml"


def _specs(path: Path, overrides: list[str] | None = None) -> dict[str, Any]:
    cfg = load_config(path, overrides or [])
    return {s.name: s for s in EXPERIMENTS.get("two_phase").build(cfg)}


def _plugin(spec: Any) -> dict[str, Any]:
    (plugin,) = spec.params.instruct.train.plugins
    return dict(plugin)


def test_lf_h1_freezes_whole_layers_and_lf_h2_per_weight_type() -> None:
    """The two-phase CFT paper, section 5.2: LF_H1 freezes "a random set of 10 layers"; LF_H2 picks
    layers "separately for Key, Query, and Value"; Spectrum per module."""
    from polymnesia.methods.layer_freezing import LayerFreezingConfig, resolve_frozen
    from polymnesia.testing import tiny_model

    specs = _specs(SMOKE)
    h1, h2, sp = (_plugin(specs[f"mit_{n}"]) for n in ("LF_H1", "LF_H2", "Spectrum"))
    assert h1["by"] == "layer" and h2["by"] == "type" and sp["by"] == "type"
    model = tiny_model("mistral", 50, num_hidden_layers=3)
    frozen = resolve_frozen(
        LayerFreezingConfig(**{k: v for k, v in h1.items() if k != "name"}), model
    )
    layers = {n.split(".")[2] for n in frozen}
    whole = {n for n, p in model.named_parameters() if p.ndim >= 2 and ".layers.1." in n}
    assert len(layers) == 1  # top_k: 1 -> one whole decoder layer, every matrix of it
    (i,) = layers
    assert {n for n in frozen if n.endswith("weight") and "norm" not in n} == {
        n.replace(".1.", f".{i}.") for n in whole
    }


def test_hidden_embedder_des_stage_reads_the_base_model() -> None:
    des = _specs(SMOKE, ["similarity.embedder=hidden"])["des_english__similar"]
    assert des.inputs["model"] == PRETRAIN
    assert "model" not in _specs(SMOKE)["des_english__similar"].inputs  # the USE embedder


def test_hidden_embedder_runs_in_the_dataset_similarity_stage(
    make_tok_model: Any, tmp_path: Path
) -> None:
    from polymnesia.io import write_jsonl_atomic
    from polymnesia.models.io import save_model_and_tokenizer
    from polymnesia.pipeline.stage import StageContext, StageSpec
    from polymnesia.stages.similarity import (
        DatasetSimilarity,
        DatasetSimilarityParams,
        SimilarityConfig,
    )

    texts = ["In the beginning God created", "And the earth was void", "The Lord is my shepherd"]
    tok, model = make_tok_model(texts)
    save_model_and_tokenizer(model, tok, tmp_path / "base" / "model")
    for name in ("a", "b"):
        rows = [{"instruction": "Repeat", "input": t, "output": t} for t in texts]
        write_jsonl_atomic(tmp_path / name / "records.jsonl", rows)
    params = DatasetSimilarityParams(
        label="a -> b", similarity=SimilarityConfig(embedder="hidden", samples=3)
    )
    spec = StageSpec("des", "dataset_similarity", params, {"a": "a", "b": "b", "model": "m"})
    (tmp_path / "des").mkdir()
    inputs = {"a": tmp_path / "a", "b": tmp_path / "b", "model": tmp_path / "base"}
    (score,) = DatasetSimilarity().run(StageContext(spec, tmp_path / "des", inputs))
    assert score.metric == "des" and score.value == pytest.approx(1.0, abs=1e-5)


def test_offline_configs_give_the_drift_figures_at_least_three_layers() -> None:
    for path in (SMOKE, SHIPPED):
        cfg = load_config(path)
        layers = cfg.base.model.dims()["num_hidden_layers"]
        assert layers + int(cfg.drift.include_embeddings) >= MIN_LAYERS, path.name


def _drift(layers: int) -> list[Score]:
    return [
        Score(
            model=m,
            lang="en",
            metric="layer_covariance_drift",
            value=0.1 * i + j,
            task="drift",
            step=i,
            extra={"reference": "P1 english"},
        )
        for j, m in enumerate(["P2", "base"])
        for i in range(layers)
    ]


class _NoEvidence:
    def has(self, stage: str) -> bool:
        return False


@pytest.mark.parametrize(("layers", "drawn"), [(2, False), (3, True)])
def test_figures_need_three_layers_or_say_why(tmp_path: Path, layers: int, drawn: bool) -> None:
    cfg = load_config(SMOKE)
    records = {}  # the drift stages' t-SNE points, as the run folder's stage records keep them
    for pair in cfg.pairs:
        pts = {m: [[float(i), float(i)] for i in range(layers)] for m in ("P1", "P2")}
        name = f"drift_{pair.key}"
        records[name] = StageRecord(name, 1.0, {"tsne.json": pts})
    rep = Report("t")
    figures(cfg, rep, tmp_path, _NoEvidence(), _drift(layers), {}, records)
    text = "\n".join(str(s.payload) for s in rep.sections)
    assert (tmp_path / "figures" / "fig2_layer_drift.png").is_file() == drawn
    assert (tmp_path / "figures" / "fig1_tsne_english__similar.png").is_file() == drawn
    assert ("Figures 1 and 2 are not drawn" in text) != drawn


def test_layer_curves_are_on_integer_layers() -> None:
    curves = layer_curves(_drift(3))
    assert all(xs == [0, 1, 2] and all(isinstance(x, int) for x in xs) for xs, _ in curves.values())


def test_a_model_keeps_its_colour_across_figures_1_and_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import polymnesia.experiments.two_phase.figures as fig_mod

    drawn: list[tuple[str, dict[str, str]]] = []  # (model, colour) per series of every figure

    def spy(series: dict, path: Path, **kw: object) -> None:
        colours = kw["colours"]
        assert isinstance(colours, dict)
        for label in series:
            model = label.split(" vs ")[0]
            drawn.append((model, colours[label]))

    monkeypatch.setattr(fig_mod, "scatter_plot", spy)
    monkeypatch.setattr(fig_mod, "line_plot", spy)
    cfg = load_config(SMOKE)
    records = {}
    for pair in cfg.pairs:
        # Figure 1 lists the models in another order than Figure 2 meets them
        pts = {m: [[float(i), float(i)] for i in range(3)] for m in ("base", "P1 english", "P2")}
        records[f"drift_{pair.key}"] = StageRecord(f"drift_{pair.key}", 1.0, {"tsne.json": pts})
    figures(cfg, Report("t"), tmp_path, _NoEvidence(), _drift(3), {}, records)
    by_model: dict[str, set[str]] = {}
    for model, colour in drawn:
        by_model.setdefault(model, set()).add(colour)
    assert set(by_model) == {"base", "P1 english", "P2"}
    assert all(len(c) == 1 for c in by_model.values()), by_model
    assert len({next(iter(c)) for c in by_model.values()}) == 3  # and the models differ


def test_a_models_curves_against_two_references_differ_by_line_style(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Figure 2: P2 against a similar and against a dissimilar Phase 1 keep P2's colour and
    differ by line style (issue 42: they were drawn alike)."""
    import polymnesia.experiments.two_phase.figures as fig_mod

    seen: dict[str, object] = {}

    def spy(series: dict, path: Path, **kw: object) -> None:
        seen.update(kw)

    monkeypatch.setattr(fig_mod, "line_plot", spy)
    drift = _drift(3) + [
        Score("P2", "en", "layer_covariance_drift", 0.5 + 0.1 * i, task="drift", step=i,
              extra={"reference": "P1 dissimilar"})
        for i in range(3)
    ]  # fmt: skip
    figures(load_config(SMOKE), Report("t"), tmp_path, _NoEvidence(), drift, {}, {})
    colours, styles = seen["colours"], seen["linestyles"]
    assert isinstance(colours, dict) and isinstance(styles, dict)
    assert colours["P2 vs P1 english"] == colours["P2 vs P1 dissimilar"]
    assert styles["P2 vs P1 english"] != styles["P2 vs P1 dissimilar"]

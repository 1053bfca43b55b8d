"""``polymnesia export RUN_DIR STAGE DEST``: a model stage's folder copied out of the cache with
a model card (``README.md``, Hugging Face's format), and optionally pushed to the Hub.

The card is composed here, at export time, from the run folder: its scores come from the
evaluation stages that read the model, which run after the stage that trained it, so the
stage's own cache entry (published, and never rewritten) cannot hold it. What the card says
of the lineage (base models, languages, data sources) comes from the run's stages, rebuilt
from its ``config.yaml`` as ``polymnesia report`` rebuilds them
(:meth:`~polymnesia.pipeline.stage.Stage.provenance` of each stage the model comes from).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import polymnesia
from polymnesia.data.sources import SOURCES
from polymnesia.errors import PolymnesiaError
from polymnesia.experiments.base import EXPERIMENTS
from polymnesia.experiments.loading import load_run_config
from polymnesia.experiments.preflight import build_specs
from polymnesia.io import read_jsonl_strict
from polymnesia.models.build import save_pretrained
from polymnesia.pipeline.export import (
    RecordedStage,
    check_export,
    copy_model,
    push_folder,
    recorded_stages,
    run_record,
    write_merged,
)
from polymnesia.pipeline.stage import STAGES, StageSpec
from polymnesia.reports.model_card import CardFacts, DataSource, model_card
from polymnesia.results import score_from_dict
from polymnesia.stages.sequential import BASE

#: the input role an evaluation stage reads the model it scores from (``stages.common.MODEL``)
EVALUATED = "model"


@dataclass(frozen=True)
class Export:
    """What :func:`export_model` did: the folder, its files, and the Hub URL if pushed."""

    dest: Path
    files: list[str]
    url: str | None = None


def ancestors(specs: dict[str, StageSpec], name: str) -> list[str]:
    """The stages ``name`` reads from, directly or not, in pipeline order (``specs``'s)."""
    seen: set[str] = set()
    todo = list(specs[name].inputs.values())
    while todo:
        up = todo.pop()
        if up not in seen and up in specs:
            seen.add(up)
            todo.extend(specs[up].inputs.values())
    return [n for n in specs if n in seen]


def evaluations_of(specs: dict[str, StageSpec], name: str) -> list[str]:
    """The evaluation stages that score the model of stage ``name``."""
    return [
        s.name
        for s in specs.values()
        if STAGES.get(s.kind).category == "evaluation" and s.inputs.get(EVALUATED) == name
    ]


def data_source(name: str, options: dict[str, Any]) -> DataSource:
    """A data source with its licence note and, for ``hf``, its Hub dataset id."""
    licence = SOURCES.get(name).licence if name in SOURCES else ""
    dataset = str(options["name"]) if name == "hf" and options.get("name") else None
    return DataSource(name, licence or "no licence note", dataset)


def _hub_or_local(names: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    local = tuple(n for n in names if Path(n).expanduser().exists() or n.startswith((".", "/")))
    return tuple(n for n in names if n not in local), local


def _architecture(model: Path) -> str | None:
    try:
        archs = json.loads((model / "config.json").read_text(encoding="utf-8")).get("architectures")
    except (OSError, ValueError, AttributeError):
        return None
    return str(archs[0]) if isinstance(archs, list) and archs else None


def _train_summary(entry: Path) -> dict[str, Any]:
    try:
        data = json.loads((entry / "train_summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def card_facts(run_dir: Path, stage: RecordedStage, *, license: str | None = None) -> CardFacts:
    """What the card of ``stage`` (a model stage of ``run_dir``) says, read from the run folder,
    the stage's cache entry and the run's specs."""
    cfg = load_run_config(run_dir)
    built = build_specs(EXPERIMENTS.get(cfg.experiment), cfg, str(run_dir / "config.yaml"))
    specs = {s.name: s for s in built}
    lineage_names = [*ancestors(specs, stage.name), stage.name] if stage.name in specs else []
    languages: list[str] = []
    bases: list[str] = []
    sources: list[DataSource] = []
    for name in lineage_names:
        p = STAGES.get(specs[name].kind).provenance(specs[name].params)
        languages += p.languages
        bases += p.base_models
        sources += [data_source(n, o) for n, o in p.sources]
    recorded = recorded_stages(run_dir)
    models = [n for n in lineage_names if n in recorded and recorded[n].exportable]
    wanted = {stage.name, *evaluations_of(specs, stage.name)} if stage.name in specs else set()
    scores_path = run_dir / "results" / "scores.jsonl"
    records = read_jsonl_strict(scores_path, missing_ok=True, advice="run `polymnesia report`")
    scores = [score_from_dict(r, str(scores_path)) for r in records if r.get("stage") in wanted]
    hub, local = _hub_or_local(list(dict.fromkeys(bases)))
    spec = specs.get(stage.name)
    return CardFacts(
        run_name=str(cfg.name),
        protocol=str(cfg.experiment),
        stage=stage.name,
        kind=stage.kind,
        fingerprint=stage.fingerprint,
        config_hash=str(run_record(run_dir).get("config_hash", "")),
        kind_version=STAGES.get(stage.kind).version,
        polymnesia_version=polymnesia.__version__,
        description=str(cfg.description),
        label=spec.label if spec is not None else "",
        seed=cfg.seed if cfg.seeds is None else None,
        base_models=hub,
        local_bases=local,
        languages=tuple(dict.fromkeys(languages)),
        sources=tuple(dict.fromkeys(sources)),
        lineage=tuple((n, recorded[n].kind) for n in models),
        architecture=_architecture(stage.model),
        train_summary=_train_summary(stage.entry),
        scores=tuple(scores),
        license=license,
    )


def export_model(
    run_dir: Path,
    stage: str,
    dest: Path,
    *,
    license: str | None = None,
    push_to: str | None = None,
    private: bool = False,
) -> Export:
    """Copy the model of ``stage`` in ``run_dir`` to ``dest`` with its card; push it to the Hub
    repository ``push_to`` if given (:func:`polymnesia.pipeline.export.check_push` first)."""
    recorded = check_export(run_dir, stage, dest)
    facts = card_facts(run_dir, recorded, license=license)
    if recorded.holds_adapter:
        files, facts = _export_merged(run_dir, recorded, dest, facts)
    else:
        files = copy_model(recorded, dest, model_card(facts))
    url = None
    if push_to is not None:
        message = f"polymnesia export: {facts.run_name} {stage} ({facts.fingerprint[:12]})"
        url = push_folder(dest, push_to, private=private, message=message)
    return Export(dest, files, url)


def _export_merged(
    run_dir: Path, recorded: RecordedStage, dest: Path, facts: CardFacts
) -> tuple[list[str], CardFacts]:
    """A LoRA stage (adapter only): its adapter merged into its base, saved as a whole model
    with its tokenizer, the adapter in ``adapter/`` beside it."""
    cfg = load_run_config(run_dir)
    built = build_specs(EXPERIMENTS.get(cfg.experiment), cfg, str(run_dir / "config.yaml"))
    spec = {s.name: s for s in built}.get(recorded.name)
    merged_model = getattr(STAGES.get(recorded.kind), "merged_model", None)
    stages = recorded_stages(run_dir)
    if spec is None or merged_model is None or any(up not in stages for up in spec.inputs.values()):
        raise PolymnesiaError(
            f"stage {recorded.name!r} ({recorded.kind}) holds a LoRA adapter that polymnesia "
            "cannot merge into its base; accepted: a sequential_step of a LoRA method, with "
            "its base stage finished in the run"
        )
    inputs = {role: stages[up].entry for role, up in spec.inputs.items()}
    model, tok = merged_model(spec.params, inputs, recorded.entry)
    facts = replace(facts, architecture=type(model).__name__, merged_into=spec.inputs[BASE])

    def save(folder: Path) -> None:
        save_pretrained(model, folder, safe_serialization=True)
        tok.save_pretrained(folder)

    return write_merged(recorded, dest, model_card(facts), save), facts

"""A model card (Hugging Face's format: YAML front matter, then Markdown) for a model stage of a
run, composed from plain facts: what the run folder and the stage's specs say
(:func:`polymnesia.experiments.export.card_facts` gathers them, ``polymnesia export`` writes the
card). Nothing here reads a file.

The front matter holds what the Hub reads (``language``, ``base_model``, ``datasets``,
``license``, ``library_name``, ``pipeline_tag``, ``tags``) and a ``polymnesia`` block (protocol,
run, stage, fingerprints); the body says the protocol, the fingerprints, the lineage, the
training summary, the data and their licence notes, and the scores of the stage's evaluations
with their intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from polymnesia.results import Score

#: a Hugging Face architecture's suffix -> the Hub's pipeline tag
PIPELINE_TAGS = {
    "ForCausalLM": "text-generation",
    "ForMaskedLM": "fill-mask",
    "ForSequenceClassification": "text-classification",
    "ForTokenClassification": "token-classification",
    "ForQuestionAnswering": "question-answering",
}
#: the transformers class a card's loading example uses for each pipeline tag
AUTO_CLASSES = {
    "text-generation": "AutoModelForCausalLM",
    "fill-mask": "AutoModelForMaskedLM",
    "text-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
    "question-answering": "AutoModelForQuestionAnswering",
}
#: train_summary.json keys shown first, with their names in the card
SUMMARY_NAMES = {
    "steps": "optimizer steps",
    "final_loss": "final training loss",
    "tokens": "tokens seen",
    "seconds": "training time (s)",
    "parameters": "parameters",
    "engine": "engine",
    "resumed_from": "resumed from step",
}
#: the licence a card names when no one licence is known for the weights
UNKNOWN_LICENSE = "other"


@dataclass(frozen=True)
class DataSource:
    """One data source the model's lineage read: its name in polymnesia (``bible``, ``udhr``,
    ``local``, ``hf``), its Hub dataset id where it has one, and its licence note."""

    name: str
    licence: str
    dataset: str | None = None


@dataclass(frozen=True)
class CardFacts:
    """What a model card says; every field comes from the run folder or the stage's spec."""

    run_name: str
    protocol: str
    stage: str
    kind: str
    fingerprint: str
    config_hash: str
    kind_version: str = "1"
    polymnesia_version: str = ""
    description: str = ""
    label: str = ""  # the spec's human description
    seed: int | None = None
    base_models: tuple[str, ...] = ()  # Hub ids
    local_bases: tuple[str, ...] = ()  # local folders the lineage started from
    languages: tuple[str, ...] = ()
    sources: tuple[DataSource, ...] = ()
    lineage: tuple[tuple[str, str], ...] = ()  # (stage, kind) of the models it comes from
    architecture: str | None = None
    train_summary: dict[str, Any] = field(default_factory=dict)
    scores: tuple[Score, ...] = ()
    license: str | None = None  # a licence id the exporter gives (None: not known)
    #: a LoRA stage exported merged: the stage of the base its adapter was merged into
    merged_into: str | None = None


def pipeline_tag(architecture: str | None) -> str | None:
    """The Hub's pipeline tag for a transformers architecture name (``MistralForCausalLM``)."""
    for suffix, tag in PIPELINE_TAGS.items():
        if architecture and architecture.endswith(suffix):
            return tag
    return None


def front_matter(facts: CardFacts) -> dict[str, Any]:
    """The card's YAML metadata, in the Hub's field names (empty fields left out)."""
    meta: dict[str, Any] = {}
    if facts.languages:
        meta["language"] = list(facts.languages)
    meta["license"] = facts.license or UNKNOWN_LICENSE
    if facts.license is None:
        meta["license_name"] = "training-data-terms"
    meta["library_name"] = "transformers"
    tag = pipeline_tag(facts.architecture)
    if tag:
        meta["pipeline_tag"] = tag
    if facts.base_models:
        meta["base_model"] = (
            facts.base_models[0] if len(facts.base_models) == 1 else list(facts.base_models)
        )
    datasets = [s.dataset for s in facts.sources if s.dataset]
    if datasets:
        meta["datasets"] = list(dict.fromkeys(datasets))
    meta["tags"] = ["polymnesia", facts.protocol, facts.kind]
    meta["polymnesia"] = {
        "protocol": facts.protocol,
        "run": facts.run_name,
        "stage": facts.stage,
        "kind": facts.kind,
        "stage_fingerprint": facts.fingerprint,
        "config_hash": facts.config_hash,
        "sources": [s.name for s in facts.sources],
    }
    if facts.merged_into:
        meta["polymnesia"]["merged_adapter"] = {
            "base_stage": facts.merged_into,
            "folder": "adapter",
        }
    return meta


def _number(x: Any) -> str:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    if isinstance(x, int):
        return f"{x:,}"
    return "nan" if math.isnan(x) else f"{x:.4g}"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The training summary as a two-column table (known keys first, then the others)."""
    if not summary:
        return ["This stage trains nothing itself (it imports or merges models); see its lineage."]
    keys = [k for k in SUMMARY_NAMES if k in summary] + sorted(
        k for k in summary if k not in SUMMARY_NAMES
    )
    rows = ["| | |", "|---|---|"]
    for key in keys:
        value = summary[key]
        if value is None or isinstance(value, (dict, list)):
            continue
        rows.append(f"| {SUMMARY_NAMES.get(key, key)} | {_cell(_number(value))} |")
    return rows


def _interval(s: Score) -> str:
    if s.ci_low is not None and s.ci_high is not None:
        return f"[{_number(s.ci_low)}, {_number(s.ci_high)}]"
    if s.stderr is not None:
        return f"± {_number(s.stderr)} (s.e.)"
    return "–"


def score_lines(scores: Sequence[Score]) -> list[str]:
    """One row per score record, ordered by stage, task, metric, setting, step and language."""
    if not scores:
        return ["No evaluation of this stage's model is recorded in the run folder."]
    extra = [
        n for n in ("setting", "step", "seed") if any(getattr(s, n) is not None for s in scores)
    ]
    head = ["evaluation", "task", "metric", *extra, "language", "group", "value", "interval", "n"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def key(s: Score) -> tuple[Any, ...]:
        return (s.stage or "", s.task, s.metric, str(s.setting), s.step or 0, s.seed or 0, s.lang)

    for s in sorted(scores, key=key):
        cells = [s.stage or "", s.task, s.metric, *(getattr(s, n) for n in extra)]
        cells += [s.lang, s.group or "", _number(s.value), _interval(s), s.n or ""]
        rows.append("| " + " | ".join(_cell("" if c is None else c) for c in cells) + " |")
    return rows


def licence_lines(facts: CardFacts) -> list[str]:
    """Why the card names the licence it names, and the terms of the data and bases."""
    if facts.license is not None:
        lines = [f"The exporter gave the licence `{facts.license}` for these weights."]
    else:
        lines = [
            "`license: other`: polymnesia does not know one licence for these weights. They "
            "were trained from the data below (and the base models named above, whose own "
            "licences apply); check those terms before you share or use the model."
        ]
    if facts.sources:
        lines.append("")
    for s in facts.sources:
        lines.append(f"- `{s.name}`{f' ({s.dataset})' if s.dataset else ''}: {s.licence}")
    return lines


def model_card(facts: CardFacts) -> str:
    """The whole card: ``---``, the YAML front matter, ``---``, then the Markdown body."""
    meta = yaml.safe_dump(front_matter(facts), sort_keys=False, allow_unicode=True)
    title = f"{facts.run_name}: {facts.stage}"
    lines = [f"# {title}", ""]
    what = f"The model of stage `{facts.stage}` (`{facts.kind}`)"
    lines += [f"{what}{f', {facts.label}' if facts.label else ''}, of a polymnesia run.", ""]
    lines += ["## Protocol", ""]
    lines.append(f"- protocol (`experiment:`): `{facts.protocol}`")
    about = f": {facts.description}" if facts.description else ""
    lines.append(f"- run: `{facts.run_name}`{about}")
    if facts.seed is not None:
        lines.append(f"- seed: {facts.seed}")
    lines.append(
        f"- stage fingerprint: `{facts.fingerprint}` (`{facts.kind}` version {facts.kind_version})"
    )
    lines.append(f"- config hash: `{facts.config_hash}`")
    if facts.polymnesia_version:
        lines.append(f"- polymnesia {facts.polymnesia_version}")
    lines.append("")
    lines += ["## Lineage", ""]
    bases = [f"`{b}` (Hugging Face Hub)" for b in facts.base_models]
    bases += [f"`{b}` (a local folder)" for b in facts.local_bases]
    lines.append(f"Started from {', '.join(bases)}." if bases else "Trained from scratch.")
    if facts.lineage:
        chain = " → ".join(f"`{name}` ({kind})" for name, kind in facts.lineage)
        lines.append(f"Model stages: {chain}.")
    if facts.languages:
        lines.append(f"Languages trained on: {', '.join(facts.languages)}.")
    if facts.merged_into:
        lines.append(
            f"The stage trained a LoRA adapter on the model of stage `{facts.merged_into}`: "
            "this folder is that base with the adapter merged in (PEFT's `merge_and_unload`), "
            "a whole model; `adapter/` holds the adapter itself, for PEFT on that base."
        )
    lines.append("")
    lines += ["## Training", "", *summary_lines(facts.train_summary), ""]
    lines += ["## Evaluation", ""]
    lines.append(
        "Every score the run recorded for this model: the stage's own and those of the "
        "evaluation stages that read it. The interval is the one the record holds (a bootstrap "
        "over test items, or over seeds and items; lm-evaluation-harness gives a standard error)."
    )
    lines += ["", *score_lines(facts.scores), ""]
    lines += ["## Licence", "", *licence_lines(facts), ""]
    auto = AUTO_CLASSES.get(pipeline_tag(facts.architecture) or "", "AutoModel")
    lines += [
        "## Use",
        "",
        "```python",
        f"from transformers import {auto}, AutoTokenizer",
        "",
        f'model = {auto}.from_pretrained("PATH_OR_REPO")',
        'tokenizer = AutoTokenizer.from_pretrained("PATH_OR_REPO")',
        "```",
        "",
    ]
    return f"---\n{meta}---\n\n" + "\n".join(lines)

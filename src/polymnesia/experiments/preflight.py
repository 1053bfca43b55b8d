"""What ``run``, ``validate``, ``plan`` and ``run --dry-run`` check before any stage runs,
in one place: the command line calls these, and tests call them directly.

- :func:`build_specs`: a protocol's stages from its config, a validation error raised while
  building them as one line, and data languages the source lacks refused;
- :func:`check_config`: what ``validate`` does for one config file (load, build, check the
  settings and lm-eval task names, plan the stages); :func:`check_loaded` all but the load;
- :func:`check_settings`: settings that a stage would refuse only when it runs (after the
  stages before it trained), checked against what is known without data or downloads:
  ``instruct.fields`` and instruction-set ``fields`` name known roles; the poly_* lm-eval
  tasks of a harness stage are in languages its data stage prepares; a token or span task
  without ``constructed`` is not set on a source whose records carry only a label; a LoRA
  rank fits the model's layers and a freezing ``pattern`` matches a weight matrix of the
  model, where the model is known without a download (a preset, or a local folder with a
  ``config.json``, built on the meta device: no memory, no weights); a local model folder
  reads as a model (:func:`~polymnesia.models.folders.check_model_folder`: ``config.json``'s
  sizes, the safetensors headers, ``auto_map`` only with ``trust_remote_code``), and a loaded
  model's tokenizer is its own and fits its embedding rows (the checks on models live in
  :mod:`polymnesia.experiments.model_checks`);
- :func:`check_harness_names`: lm-eval task names that polymnesia does not ship are in
  lm-eval's task index;
- :func:`preflight`: what the config asks of this machine (precision, attention kernel,
  trackers), before ``run`` trains anything;
- :func:`check_remote_code`: ``trust_remote_code: true`` only with ``--trust-remote-code``;
- :func:`check_run_dir_place`: a run folder is not under ``/proc``, ``/sys`` or ``/dev`` and
  its nearest existing folder is writable;
- :func:`check_run_record`: a run folder's ``run.json``, when there is one, is a JSON object
  (``run`` and ``compare``).

Each refusal is one line naming what is wrong and what is accepted.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from polymnesia.config.base import submodels
from polymnesia.config.loader import format_validation_error
from polymnesia.data.catalog import check_known_languages
from polymnesia.data.config import DataConfig
from polymnesia.errors import ConfigError, PolymnesiaError
from polymnesia.experiments.base import EXPERIMENTS
from polymnesia.experiments.loading import load_config
from polymnesia.experiments.model_checks import (
    check_model_folders,
    check_model_settings,
    check_tokenizers,
)
from polymnesia.harness.tasks import HARNESS_TASKS, check_tasks, expand, is_shipped
from polymnesia.hub import hub_offline
from polymnesia.instructions.hub import ROLES
from polymnesia.models.build import check_attention
from polymnesia.pipeline.runner import plan
from polymnesia.pipeline.stage import StageSpec
from polymnesia.stages.instruct import InstructConfig
from polymnesia.stages.instruction_data import InstructionSetConfig
from polymnesia.tasks.config import TaskConfig
from polymnesia.training.config import check_precision
from polymnesia.training.trackers import check_trackers
from polymnesia.trust import allow_remote_code

#: file systems that are views of the kernel, not places for a run's files
PSEUDO_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))
#: what ``instruct.fields`` maps (a Hub dataset's columns to the record's parts)
INSTRUCT_ROLES = ("instruction", "input", "output")
#: sources whose records carry a text and a label only (no ``meta["tags"]`` or answers)
LABEL_ONLY_SOURCES = ("bible", "udhr")


def check_run_dir_place(run_dir: Path) -> None:
    """One line for a run folder that cannot hold files: under ``/proc``, ``/sys`` or ``/dev``,
    below a file, or in a folder this user cannot write (checked without writing)."""
    resolved = Path(os.path.abspath(run_dir))
    with contextlib.suppress(OSError, RuntimeError):  # a loop of links: kept as written
        resolved = resolved.resolve()
    for root in PSEUDO_ROOTS:
        if resolved == root or root in resolved.parents:
            raise PolymnesiaError(
                f"cannot use run folder {run_dir}: it is under {root}, which the kernel provides "
                "and which holds no files; pass a --run-dir on a disk"
            )
    existing = resolved
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing != resolved and not existing.is_dir():
        raise PolymnesiaError(
            f"cannot use run folder {run_dir}: {existing} is a file; pass a --run-dir in a folder"
        )
    if existing.is_dir() and not os.access(existing, os.W_OK | os.X_OK):
        raise PolymnesiaError(
            f"cannot use run folder {run_dir}: {existing} is not writable; pass a writable "
            "--run-dir"
        )


def check_run_record(run_dir: Path, advice: str = "") -> None:
    """One line when ``run_dir/run.json`` exists but is not a JSON object (``[]``, ``null``,
    not UTF-8, not JSON): a run folder's record is damaged, and the run would stop on it."""
    record = run_dir / "run.json"
    if not record.exists():
        return
    why = ""
    try:
        data = json.loads(record.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        why = "it is not UTF-8 text"
    except ValueError as e:
        why = f"it is not JSON ({str(e).splitlines()[0]})"
    except OSError as e:
        why = f"it cannot be read ({e.strerror or type(e).__name__})"
    else:
        if not isinstance(data, dict):
            why = f"it holds {json.dumps(data)[:20]}, not a JSON object"
        elif not isinstance(data.get("stages", {}), dict):
            why = "its 'stages' is not a JSON object"
    if why:
        advice = advice or (
            f"pass another --run-dir, or remove {run_dir} to run afresh (the stage cache keeps "
            "what was built)"
        )
        raise PolymnesiaError(f"run folder {run_dir} has a damaged run.json ({why}); {advice}")


# -- settings a stage would refuse late ---------------------------------------------------


def check_settings(cfg: Any, specs: list[Any], source: str) -> None:
    """The settings a stage would refuse late (this module's docstring lists them), one
    :class:`ConfigError` line prefixed with ``config SOURCE:``."""
    try:
        check_tokenizers(cfg, specs, check_model_folders(cfg, specs))
        _check_fields(cfg)
        _check_harness_languages(specs)
        _check_task_kinds(cfg)
        check_model_settings(cfg)
    except ConfigError as e:
        raise ConfigError(f"config {source}: {e}") from None


def _check_fields(cfg: Any) -> None:
    for path, node in submodels(cfg):
        if isinstance(node, InstructConfig):
            accepted: tuple[str, ...] = INSTRUCT_ROLES
        elif isinstance(node, InstructionSetConfig):
            accepted = ROLES
        else:
            continue
        bad = sorted(set(node.fields) - set(accepted))
        if bad:
            raise ConfigError(
                f"{path}.fields: unknown role {', '.join(map(repr, bad))}; accepted: "
                f"{', '.join(accepted)} (each maps to a column of the dataset)"
            )


def _check_harness_languages(specs: list[Any]) -> None:
    """A poly_* task reads its documents from its stage's data input: its language must be one
    that data stage prepares (else the harness stage stops after every model trained)."""
    by_name = {s.name: s for s in specs}
    for spec in specs:
        if spec.kind != "evaluate_harness" or "data" not in spec.inputs:
            continue
        data = by_name.get(spec.inputs["data"])
        languages = getattr(getattr(data, "params", None), "languages", None)
        if not isinstance(languages, list):
            continue
        need = {t: HARNESS_TASKS.get(t).data_languages for t in expand(spec.params.tasks)}
        missing = [t for t, langs in need.items() if any(x not in languages for x in langs)]
        if missing:
            lang = next(x for x in need[missing[0]] if x not in languages)
            raise ConfigError(
                f"lm-eval task {missing[0]} reads language '{lang}', which the data does not "
                f"prepare (languages: {', '.join(languages)}); add '{lang}' to the data languages "
                "or pick a task in one of them"
            )


def _check_task_kinds(cfg: Any) -> None:
    """A token or span task needs records with tags or answers: a source whose records carry
    only a label has none, unless the task is ``constructed`` from labelled verses."""
    default = getattr(cfg, "data", None)
    for path, node in submodels(cfg):
        if not isinstance(node, TaskConfig) or node.kind == "sequence" or node.constructed:
            continue
        if getattr(cfg, "task_pivot", None) or getattr(cfg, "slot_field", None):
            continue  # lifelong builds its token task from these
        data = getattr(node, "data", None) or default
        if isinstance(data, DataConfig) and data.source in LABEL_ONLY_SOURCES:
            what = "tags (one per word)" if node.kind == "token" else "questions and answers"
            hint = "genre_segments" if node.kind == "token" else "genre_question"
            raise ConfigError(
                f"{path}.kind is '{node.kind}', but the {data.source} source's records carry a "
                f"label per text, no {what}; set {path}.constructed: {hint} to build the task from "
                "labelled verses, or use a source whose records carry them"
            )


# -- stages, machine and trust -------------------------------------------------------


def build_specs(exp: Any, cfg: Any, source: str) -> list[Any]:
    """``exp.build(cfg)``, with a validation error raised while building turned into one line."""
    try:
        specs = list(exp.build(cfg))
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, exp.Config, source)) from None
    for spec in specs:  # a language the source lacks: refused now, not at its data stage
        if spec.kind == "prepare_data":
            d = spec.params.data
            check_known_languages(d.source, d.options, spec.params.languages, f"config {source}")
    return specs


def check_config(path: str, overrides: list[str] | None = None) -> tuple[Any, list[StageSpec]]:
    """``validate`` for one config file: its config and stages, after every check that needs
    no data, no download and no model (one line for the first problem)."""
    cfg = load_config(path, overrides or [])
    return cfg, check_loaded(cfg, path)


def check_loaded(cfg: Any, path: str) -> list[StageSpec]:
    """The rest of :func:`check_config` for a config already read (``validate`` reads it with
    :func:`~polymnesia.experiments.loading.load_config` first, which loads no torch: a key
    typo or a missing file is answered before the stages are imported)."""
    specs = build_specs(EXPERIMENTS.get(cfg.experiment), cfg, path)
    check_settings(cfg, specs, path)
    check_harness_names(specs)
    plan(specs)
    return specs


def check_remote_code(cfg: Any, allowed: bool) -> None:
    """A config may ask for trust_remote_code; only ``--trust-remote-code`` (``allowed``)
    grants it."""

    def asked(node: Any, path: str) -> str | None:
        if isinstance(node, dict):
            for k, v in node.items():
                key = f"{path}.{k}" if path else str(k)
                if k == "trust_remote_code" and v is True:
                    return key
                if found := asked(v, key):
                    return found
        elif isinstance(node, list):
            for i, v in enumerate(node):
                if found := asked(v, f"{path}.{i}"):
                    return found
        return None

    key = asked(cfg.model_dump(mode="json"), "")
    if key and not allowed:
        raise PolymnesiaError(
            f"'{key}: true' asks to run code from a model, tokenizer or dataset repository; "
            "polymnesia runs such code only when the command line says so: add --trust-remote-code"
        )
    allow_remote_code(allowed)


def preflight(cfg: Any, device_type: str, source: str, specs: list[Any] | None = None) -> None:
    """What the config asks of this machine, checked before any stage runs (one line each):
    fp16 training needs an accelerator, an attention kernel what it runs on
    (:func:`~polymnesia.models.build.check_attention`), a tracker its package, and the
    lm-eval tasks of ``specs``' harness stages that are not polymnesia's must be in lm-eval's
    task index (a few seconds, so here rather than whenever a config is read; an unknown
    name would otherwise stop the run at its harness stage, after all its training)."""
    check_precision(cfg, device_type, f"config {source}")
    check_trackers(cfg, f"config {source}")
    for path, node in submodels(cfg):
        kernel = getattr(node, "attn_implementation", None)
        if isinstance(kernel, str):
            key = f"{path}.attn_implementation" if path else "attn_implementation"
            check_attention(kernel, device_type, f"config {source}: {key}")
    check_harness_names(specs or [])


def check_harness_names(specs: list[Any]) -> None:
    """The lm-eval tasks of ``specs``' harness stages that polymnesia does not ship must be in
    lm-eval's task index (read by ``run``'s preflight and by ``validate``)."""
    tasks = sorted(
        {t for spec in specs if spec.kind == "evaluate_harness" for t in spec.params.tasks}
    )
    if any(not is_shipped(t) for t in tasks):
        check_tasks(tasks, hub_offline(), verify_online=True)

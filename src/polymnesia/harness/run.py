"""Run lm-evaluation-harness on a local HF model folder; turn its results into Score records.

:func:`run_lm_eval` evaluates through lm-eval's own HF model class
(``lm_eval.models.huggingface.HFLM``) and ``lm_eval.simple_evaluate``, with
polymnesia's offline tasks on lm-eval's include path (their documents and
their YAML for the model's chat format in ``task_data``, see
:mod:`polymnesia.harness.docs`) and every other task name passed to lm-eval
unchanged. lm-eval's JSON output is kept: ``results.json``
(everything ``simple_evaluate`` returns but the per-sample logs) and, with
``log_samples``, ``samples_TASK.jsonl``.

:func:`results_to_scores` makes one :class:`~polymnesia.results.Score` per
task and metric, with lm-eval's standard error in ``Score.stderr``.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from polymnesia.errors import PolymnesiaError
from polymnesia.harness.languages import AMBIGUOUS, task_language
from polymnesia.harness.tasks import HARNESS_TASKS, TASK_DIR, expand, is_shipped, lm_eval_index
from polymnesia.instructions.punkt import ensure_punkt
from polymnesia.io import atomic_write_text
from polymnesia.results import Score
from polymnesia.runtime import is_terminal

#: language of well-known online tasks whose names do not end in a language code (prefix match)
ONLINE_TASK_LANGS: dict[str, str] = {
    "ifeval": "en",
    "mmlu": "en",
    "hellaswag": "en",
    "alpaca_eval": "en",
    "arc_easy": "en",
    "arc_challenge": "en",
    "truthfulqa": "en",
    "winogrande": "en",
    "gsm8k": "en",
}


#: lm-eval warnings that polymnesia's calls raise every time, by design: its shipped tasks
#: read their documents through a function (``custom_dataset``), and the config sets
#: ``num_fewshot`` and the generation length. Dropped from the log (:func:`lm_eval_log`).
EXPECTED_WARNINGS = (
    "Custom kwargs can be passed to `--metadata`",
    "Overwriting default num_fewshot",
    "specified through cli, these settings will update",
)


@contextmanager
def lm_eval_log(stream: Any = None) -> Iterator[logging.Handler | None]:
    """lm-eval's warnings as ``[lm-eval] warning: ...`` lines on ``stream`` (default standard
    error) for one evaluation, without the ones in :data:`EXPECTED_WARNINGS`. Without this
    they reach Python's last-resort handler bare, a few per task and stage. Left alone when
    lm-eval's logger already has a handler (``lm_eval.utils.setup_logging``, or the user's)."""
    logger = logging.getLogger("lm_eval")
    if logger.handlers:
        yield None
        return
    handler = logging.StreamHandler(sys.stderr if stream is None else stream)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_LmEvalFormatter())
    handler.addFilter(_unexpected)
    propagate, logger.propagate = logger.propagate, False
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def _lm_class(hflm: Any, *, quiet: bool) -> Any:
    """lm-eval's ``HFLM``, or (``quiet``: output going to a file) a subclass that turns off its
    request progress bars ("Tokenizing inputs", "Running loglikelihood requests", one
    carriage-return line each per task in a log file) through lm-eval's own ``disable_tqdm``."""
    if not quiet:
        return hflm

    class QuietHFLM(hflm):
        def loglikelihood(self, requests: Any, disable_tqdm: bool = False) -> Any:
            return super().loglikelihood(requests, disable_tqdm=True)

        def loglikelihood_rolling(self, requests: Any, disable_tqdm: bool = False) -> Any:
            return super().loglikelihood_rolling(requests, disable_tqdm=True)

        def generate_until(self, requests: Any, disable_tqdm: bool = False) -> Any:
            return super().generate_until(requests, disable_tqdm=True)

    return QuietHFLM


class _LmEvalFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"[lm-eval] {record.levelname.lower()}: {record.getMessage()}"


def _unexpected(record: logging.LogRecord) -> bool:
    message = str(record.msg)
    return not any(expected in message for expected in EXPECTED_WARNINGS)


def run_lm_eval(
    model_dir: Path,
    tasks: Sequence[str],
    out_dir: Path,
    *,
    task_data: Path | None = None,
    num_fewshot: int | None = None,
    limit: int | float | None = None,
    batch_size: int | str = 8,
    device: str | None = None,
    dtype: str = "auto",
    add_bos_token: bool | None = True,
    seed: int = 0,
    log_samples: bool = True,
    bootstrap_iters: int = 1000,
    max_gen_toks: int | None = None,
) -> dict[str, Any]:
    """lm-eval's results for ``tasks`` on the HF folder ``model_dir``; JSON kept in ``out_dir``.

    ``add_bos_token=True`` prepends BOS to every request (polymnesia's
    tokenizers add none by themselves and its models are trained with it; Llama
    and Mistral tokenizers add it anyway); ``None`` leaves it to the tokenizer.
    ``max_gen_toks`` overrides every generation task's limit (lm-eval's ``gen_kwargs``).
    """
    import lm_eval
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    ensure_punkt()  # before lm-eval imports its IFEval checkers (they would download punkt)
    if expand(tasks) and task_data is None:
        raise PolymnesiaError(
            "polymnesia's offline lm-eval tasks need their documents: pass task_data "
            "(written by polymnesia.harness.docs.write_task_data)"
        )
    online = any(not is_shipped(t) for t in tasks)
    metadata = {"polymnesia_data": str(task_data)} if task_data is not None else None
    include = TASK_DIR if task_data is None else _task_folder(task_data, tasks)
    import torch

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    with lm_eval_log(), _bootstrap_in_process():
        tm = TaskManager(include_path=str(include), include_defaults=online, metadata=metadata)
        lm = _lm_class(HFLM, quiet=not is_terminal())(
            pretrained=str(model_dir),
            device=device,
            batch_size=batch_size,
            dtype=dtype,
            add_bos_token=add_bos_token,
        )
        results = lm_eval.simple_evaluate(
            model=lm,
            tasks=list(tasks),
            num_fewshot=num_fewshot,
            limit=limit,
            task_manager=tm,
            log_samples=log_samples,
            bootstrap_iters=bootstrap_iters,
            gen_kwargs={"max_gen_toks": max_gen_toks} if max_gen_toks else None,
            random_seed=seed,
            numpy_random_seed=seed,
            torch_random_seed=seed,
            fewshot_random_seed=seed,
        )
    if results is None:  # only on non-main processes
        return {}
    results = dict(results)
    save_results(results, out_dir)
    return results


@contextmanager
def _bootstrap_in_process() -> Iterator[None]:
    """lm-eval's bootstrap of a stderr (chrF, BLEU, F1, ...) in this process, not in a
    ``multiprocessing.Pool`` forked from it: a fork of a process that runs torch's threads can
    inherit a lock held by one of them, and the worker then waits on it for ever (seen in CI).
    Its in-process loop draws the same replicates (``random.Random(i)`` per chunk of 1000)."""
    before = os.environ.get("DISABLE_MULTIPROC")
    os.environ["DISABLE_MULTIPROC"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("DISABLE_MULTIPROC", None)
        else:
            os.environ["DISABLE_MULTIPROC"] = before


def _task_folder(task_data: Path, tasks: Sequence[str]) -> Path:
    """``task_data`` when it holds the YAML of every shipped task asked for (written with the
    documents for the model's chat format), else one line saying how to write it."""
    missing = [t for t in expand(tasks) if not (task_data / f"{t}.yaml").is_file()]
    if missing:
        raise PolymnesiaError(
            f"{task_data} has no task YAML for {', '.join(missing)}; write the documents and "
            "tasks with polymnesia.harness.docs.write_task_data(..., tokenizer=...)"
        )
    return task_data


def save_results(results: Mapping[str, Any], out_dir: Path) -> None:
    """``results.json`` (lm-eval's output without samples) and ``samples_TASK.jsonl``."""
    from lm_eval.utils import handle_non_serializable

    out_dir.mkdir(parents=True, exist_ok=True)
    summary = {k: v for k, v in results.items() if k != "samples"}
    atomic_write_text(
        out_dir / "results.json",
        json.dumps(summary, indent=2, default=handle_non_serializable, ensure_ascii=False),
    )
    for task, samples in (results.get("samples") or {}).items():
        lines = [
            json.dumps(s, default=handle_non_serializable, ensure_ascii=False) for s in samples
        ]
        atomic_write_text(out_dir / f"samples_{task}.jsonl", "".join(x + "\n" for x in lines))


def task_lang(task: str, overrides: Mapping[str, str] | None = None) -> str:
    """Language of a task: ``overrides``, the shipped table, a known English task by its full
    name (``mmlu``), the language its name spells
    (:func:`polymnesia.harness.languages.task_language`:
    ``belebele_fra_Latn``, ``include_base_44_french``, ``global_mmlu_full_fr_stem``; lm-eval's
    task index decides a code that is also an English word), a known English family by prefix
    (``mmlu_anatomy``), else ``und`` (undetermined)."""

    if overrides and task in overrides:
        return overrides[task]
    if task in HARNESS_TASKS:
        return HARNESS_TASKS.get(task).lang
    if task in ONLINE_TASK_LANGS:
        return ONLINE_TASK_LANGS[task]
    lang = task_language(task)
    if lang is None and any(t in AMBIGUOUS for t in re.split(r"[_\-.\s]+", task)):
        lang = task_language(task, lm_eval_index())
    if lang is not None:
        return lang
    for prefix, code in ONLINE_TASK_LANGS.items():
        if task.startswith(prefix + "_"):
            return code
    return "und"


def finite_number(x: Any) -> float | None:
    """``x`` as a float when it is a finite int or float (not a bool), else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    return float(x) if math.isfinite(float(x)) else None


def results_to_scores(
    results: Mapping[str, Any],
    model: str,
    *,
    task_langs: Mapping[str, str] | None = None,
    **fields: Any,
) -> list[Score]:
    """One Score per task and metric of lm-eval's ``results`` (``fields``: size, params, seed...).

    lm-eval keys are ``"METRIC,FILTER"``; the metric keeps its name when the
    filter is ``none`` and becomes ``METRIC/FILTER`` otherwise. ``stderr`` is
    ``METRIC_stderr,FILTER`` (None where lm-eval gives ``N/A``).
    ``extra``: the filter, lm-eval's sample count, few-shot count and version.
    """
    out: list[Score] = []
    n_samples = results.get("n-samples", {})
    n_shot = results.get("n-shot", {})
    version = (results.get("config") or {}).get("lm_eval_version") or results.get("lm_eval_version")
    for task, row in (results.get("results") or {}).items():
        for key, raw in row.items():
            if "," not in key or "_stderr," in key:
                continue
            metric, flt = key.split(",", 1)
            value = finite_number(raw)
            if value is None:
                continue
            extra: dict[str, Any] = {"filter": flt}
            if task in n_samples:
                extra["n_samples"] = n_samples[task].get("effective")
            if task in n_shot:
                extra["num_fewshot"] = n_shot[task]
            if version:
                extra["lm_eval_version"] = version
            out.append(
                Score(
                    model=model,
                    lang=task_lang(task, task_langs),
                    metric=metric if flt == "none" else f"{metric}/{flt}",
                    value=value,
                    task=task,
                    stderr=finite_number(row.get(f"{metric}_stderr,{flt}")),
                    extra=extra,
                    **fields,
                )
            )
    return out

"""Folders written by ``lm_eval ... --output_path DIR --log_samples``, and their documents paired.

lm-eval 0.4 (its ``EvaluationTracker``) writes, for a model it names ``MODEL``::

    DIR/MODEL_SANITIZED/results_DATE.json        # the aggregated results and the run's config
    DIR/MODEL_SANITIZED/samples_TASK_DATE.jsonl  # with --log_samples: one line per document

(``MODEL_SANITIZED`` is the model name with ``/`` and ``:`` replaced by ``__``; an
``--output_path`` ending in ``.json`` writes ``DIR/NAME_DATE.json`` with the samples beside
it). A sample line holds the document's ``doc_id``, its ``filter``, the names of its
``metrics`` with each metric's value for that document, and hashes of the document, the
prompt and the target. :func:`read_lm_eval` reads one such folder (the newest run where a
folder holds several); :func:`pair_runs` pairs two runs' documents by task, filter and
``doc_id``: a document pairs when both runs scored it with the same document and target
(and the same prompt, unless the runs' chat templates differ, which changes every prompt by
design). Different ``--limit`` values leave documents in one run only; different few-shot
seeds or counts give the same document other prompts. Both are counted, never paired.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from polymnesia.errors import DataError, PolymnesiaError

_DATE = r"\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d+)?"
_RESULTS = re.compile(rf"^(?:results|.+)_({_DATE})\.json$")


@dataclass(frozen=True)
class Doc:
    """One logged sample: its hashes and the per-document value of each metric."""

    doc_hash: str
    prompt_hash: str
    target_hash: str
    values: Mapping[str, Any]


@dataclass
class LmEvalRun:
    """One lm-eval run: its results file, model name and logged documents by task."""

    results_file: Path
    results: dict[str, Any]
    docs: dict[str, dict[tuple[str, int], Doc]]  # task -> (filter, doc_id) -> Doc
    older: int = 0  # earlier runs in the same folder, left out

    @property
    def model(self) -> str:
        return str(self.results.get("model_name") or self.results_file.parent.name)

    @property
    def version(self) -> str:
        return str(self.results.get("lm_eval_version") or "?")

    @property
    def chat_template(self) -> str | None:
        sha = self.results.get("chat_template_sha")
        return str(sha) if sha else None

    def reported(self, task: str, metric: str, flt: str) -> float | None:
        """The aggregated value lm-eval reported for ``metric,flt`` of ``task`` (None: none)."""
        value = (self.results.get("results") or {}).get(task, {}).get(f"{metric},{flt}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value)

    def higher_is_better(self, task: str, metric: str) -> bool | None:
        value = (self.results.get("higher_is_better") or {}).get(task, {}).get(metric)
        return value if isinstance(value, bool) else None

    def n_shot(self, task: str) -> Any:
        return (self.results.get("n-shot") or {}).get(task)


def is_lm_eval_folder(path: Path) -> bool:
    """Whether ``path`` holds lm-eval results (``results_DATE.json`` in it or one folder down)."""
    return bool(_results_files(path))


def _results_files(path: Path) -> list[Path]:
    if not path.is_dir():
        return []
    found = [p for p in path.glob("*.json") if _RESULTS.match(p.name) and _is_results(p)]
    if not found:
        found = [p for p in path.glob("*/results_*.json") if _RESULTS.match(p.name)]
    return sorted(found)


def _is_results(path: Path) -> bool:
    if path.name.startswith("results_"):
        return True
    try:  # --output_path NAME.json writes NAME_DATE.json: lm-eval's results have "configs"
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "results" in data and "configs" in data


def read_lm_eval(path: str | Path) -> LmEvalRun:
    """The newest lm-eval run in folder ``path`` (``--output_path``, or its model subfolder),
    its logged documents included; one line when it holds none or several models' runs."""
    root = Path(path)
    files = _results_files(root)
    if not files:
        raise PolymnesiaError(
            f"{root} holds no lm-eval results (results_DATE.json, in it or in a model "
            "subfolder); pass a folder lm_eval wrote with --output_path DIR --log_samples"
        )
    folders = sorted({p.parent for p in files})
    if len(folders) > 1:
        shown = ", ".join(p.name for p in folders)
        raise PolymnesiaError(
            f"{root} holds lm-eval results of {len(folders)} models ({shown}); pass one model's "
            f"folder, such as {folders[0]}"
        )
    newest = max(files, key=lambda p: _date(p))
    try:
        results = json.loads(newest.read_text(encoding="utf-8"))
    except ValueError as e:
        raise DataError(f"{newest} is not valid JSON ({e}); rerun lm_eval") from None
    date = _date(newest)
    docs: dict[str, dict[tuple[str, int], Doc]] = {}
    for task in results.get("configs") or {}:
        sample_file = newest.parent / f"samples_{task}_{date}.jsonl"
        if sample_file.is_file():
            docs[task] = _read_samples(sample_file)
    if not docs:
        raise PolymnesiaError(
            f"{newest.parent} has lm-eval results but no samples_TASK_{date}.jsonl: rerun "
            "lm_eval with --log_samples (compare pairs the runs document by document)"
        )
    return LmEvalRun(newest, results, docs, older=len(files) - 1)


def _date(path: Path) -> str:
    m = _RESULTS.match(path.name)
    return m.group(1) if m else ""


def _read_samples(path: Path) -> dict[tuple[str, int], Doc]:
    out: dict[tuple[str, int], Doc] = {}
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                s = json.loads(line)
                key = (str(s.get("filter", "none")), int(s["doc_id"]))
                metrics = list(s.get("metrics") or [])
                doc = Doc(
                    str(s.get("doc_hash", "")),
                    str(s.get("prompt_hash", "")),
                    str(s.get("target_hash", "")),
                    {m: s.get(m) for m in metrics},
                )
            except (ValueError, KeyError, TypeError):
                raise DataError(
                    f"{path} line {i} is no lm-eval sample (JSON with doc_id and metrics)"
                ) from None
            if key in out:
                raise DataError(f"{path} logs document {key[1]} ({key[0]}) twice")
            out[key] = doc
    return out


@dataclass
class PairedMetric:
    """One metric of one task, per paired document in both runs (the reference's first)."""

    task: str
    metric: str  # lm-eval's name, ``METRIC/FILTER`` where the filter is not "none"
    ref: np.ndarray
    other: np.ndarray
    ref_value: float  # the run's value on the paired documents
    other_value: float
    higher_is_better: bool | None

    @property
    def binary(self) -> bool:
        """Whether every value is 0 or 1 (accuracy-like: McNemar's test applies)."""
        both = np.concatenate([self.ref, self.other])
        return bool(np.all((both == 0) | (both == 1)))


@dataclass
class TaskPairing:
    """How the documents of one task common to both runs paired."""

    task: str
    paired: int
    only_ref: int  # documents one run scored and the other not (different --limit)
    only_other: int
    other_prompt: int  # the same document with another prompt (few-shot seed or count)
    other_doc: int  # the same doc_id with another document or target (another dataset)

    @property
    def unpaired(self) -> int:
        return self.only_ref + self.only_other + self.other_prompt + self.other_doc

    def describe(self) -> str:
        parts = []
        if self.only_ref or self.only_other:
            parts.append(f"{self.only_ref + self.only_other} in one run only (different --limit)")
        if self.other_prompt:
            parts.append(f"{self.other_prompt} with another prompt (few-shot seed or count)")
        if self.other_doc:
            parts.append(f"{self.other_doc} with another document or target")
        why = f": {'; '.join(parts)}" if parts else ""
        return f"{self.task}: {self.paired} documents paired, {self.unpaired} not{why}"


@dataclass
class Pairing:
    """What :func:`pair_runs` found: the paired metrics, each common task's counts and one
    line per metric that cannot be tested document by document."""

    metrics: list[PairedMetric]
    tasks: list[TaskPairing]
    skipped: list[str] = field(default_factory=list)
    prompts_differ: bool = False  # chat templates differ: documents paired without prompts


def pair_runs(ref: LmEvalRun, other: LmEvalRun, labels: tuple[str, str]) -> Pairing:
    """The documents of ``ref`` and ``other`` paired by task, filter and doc_id (see the
    module docstring); one line when they share no task or no document pairs."""
    common = [t for t in ref.docs if t in other.docs]
    if not common:
        raise PolymnesiaError(
            f"{labels[0]} and {labels[1]} have no task in common ({labels[0]}: "
            f"{', '.join(sorted(ref.docs))}; {labels[1]}: {', '.join(sorted(other.docs))}); "
            "compare runs of the same tasks"
        )
    same_prompts = ref.chat_template == other.chat_template
    out = Pairing([], [], prompts_differ=not same_prompts)
    for task in sorted(common):
        a, b = ref.docs[task], other.docs[task]
        other_doc: set[int] = set()  # counted by doc_id (a task with several filters logs
        other_prompt: set[int] = set()  # one line per document and filter)
        for key in a.keys() & b.keys():
            x, y = a[key], b[key]
            if x.doc_hash != y.doc_hash or x.target_hash != y.target_hash:
                other_doc.add(key[1])
            elif same_prompts and x.prompt_hash != y.prompt_hash:
                other_prompt.add(key[1])
        bad = other_doc | other_prompt
        keys = sorted(k for k in a.keys() & b.keys() if k[1] not in bad)
        ids_a, ids_b = {k[1] for k in a}, {k[1] for k in b}
        tp = TaskPairing(
            task,
            len({k[1] for k in keys}),
            len(ids_a - ids_b),
            len(ids_b - ids_a),
            len(other_prompt - other_doc),
            len(other_doc),
        )
        out.tasks.append(tp)
        if keys:
            _paired_metrics(task, ref, other, keys, out)
    if not any(t.paired for t in out.tasks):
        lines = "; ".join(t.describe() for t in out.tasks)
        raise PolymnesiaError(
            f"no document of {labels[0]} pairs with one of {labels[1]} ({lines}); run both "
            "with the same tasks, --limit, --num_fewshot and --seed"
        )
    return out


def _paired_metrics(
    task: str, ref: LmEvalRun, other: LmEvalRun, keys: list[tuple[str, int]], out: Pairing
) -> None:
    a, b = ref.docs[task], other.docs[task]
    by_filter: dict[str, list[int]] = {}
    for flt, doc_id in keys:
        by_filter.setdefault(flt, []).append(doc_id)
    for flt, ids in by_filter.items():
        names = [m for m in a[(flt, ids[0])].values if m in b[(flt, ids[0])].values]
        for metric in names:
            label = metric if flt == "none" else f"{metric}/{flt}"
            cols = [_column(docs, flt, ids, metric) for docs in (a, b)]
            if cols[0] is None or cols[1] is None:
                out.skipped.append(
                    f"{task} {label}: its per-document values are not numbers (a corpus-level "
                    "score such as BLEU or a perplexity)"
                )
                continue
            means = [_mean_of_run(run.docs[task], flt, metric) for run in (ref, other)]
            reported = [run.reported(task, metric, flt) for run in (ref, other)]
            if any(
                r is not None and m is not None and not math.isclose(r, m, abs_tol=1e-6)
                for r, m in zip(reported, means, strict=True)
            ):
                out.skipped.append(
                    f"{task} {label}: lm-eval's score is not the mean over its documents"
                )
                continue
            out.metrics.append(
                PairedMetric(
                    task,
                    label,
                    cols[0],
                    cols[1],
                    float(cols[0].mean()),
                    float(cols[1].mean()),
                    ref.higher_is_better(task, metric),
                )
            )


def _number(value: Any) -> float | None:
    if isinstance(value, (bool, int, float)) and math.isfinite(float(value)):
        return float(value)
    return None


def _column(
    docs: Mapping[tuple[str, int], Doc], flt: str, ids: list[int], metric: str
) -> np.ndarray | None:
    values = [_number(docs[(flt, i)].values.get(metric)) for i in ids]
    if any(v is None for v in values):
        return None
    return np.asarray(values, dtype=float)


def _mean_of_run(docs: Mapping[tuple[str, int], Doc], flt: str, metric: str) -> float | None:
    values = [_number(d.values.get(metric)) for (f, _), d in docs.items() if f == flt]
    if not values or any(v is None for v in values):
        return None
    return float(np.mean([v for v in values if v is not None]))


__all__ = [
    "Doc",
    "LmEvalRun",
    "PairedMetric",
    "Pairing",
    "TaskPairing",
    "is_lm_eval_folder",
    "pair_runs",
    "read_lm_eval",
]

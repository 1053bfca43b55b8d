"""Long-format score records: the one currency between evaluation and reports.

Every evaluation stage emits :class:`Score` records, one number each
(model x language x metric, plus optional size, seed, step and setting). A run
folder keeps them in ``RUN_DIR/results/scores.jsonl``; the report step of an
experiment pivots them into the papers' tables (:mod:`polymnesia.reports.tables`)
and plots (:mod:`polymnesia.reports.plots`). Because the records are long
format, a report can always be rebuilt from the saved file alone.

The helpers here work on plain lists and dicts (no pandas): ``filter_scores``
selects, ``group_scores`` groups, ``pivot_mean`` averages into a
``{(row, col): value}`` table.

>>> s = [Score("BA", "fr", "ppl", 10.0), Score("BA", "de", "ppl", 12.0)]
>>> pivot_mean(s, "model", "metric")
{('BA', 'ppl'): 11.0}
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Protocol

from polymnesia.errors import ConfigError, DataError, PolymnesiaError
from polymnesia.io import append_jsonl, atomic_write_text, read_jsonl_strict


class Interval(Protocol):
    """What a score takes from an interval (:class:`polymnesia.metrics.uncertainty.Interval`)."""

    @property
    def low(self) -> float: ...
    @property
    def high(self) -> float: ...
    @property
    def n(self) -> int: ...
    @property
    def has_spread(self) -> bool: ...


@dataclass(frozen=True)
class Score:
    """One number: ``model`` scored ``value`` on ``metric`` in language ``lang``.

    ``model`` is the arm or method label ("Baseline", "BA", "LF-MLF");
    ``task`` the evaluation ("lm", "belebele", "xnli"); ``group`` the language
    group ("pretraining", "adapting", "other") when the stage knows it;
    ``size``/``params`` the model size label and parameter count (Aggarwal et al. 2024
    blocks its tables by size); ``seed``, ``step`` and ``setting`` (a
    source-language set, a language order) distinguish repeated runs;
    ``extra`` holds anything else and must be JSON-serialisable.

    Uncertainty (all optional, so older files still read): ``ci_low`` and
    ``ci_high`` bound ``value`` (a bootstrap interval over test items or a
    t-interval over seeds, see :mod:`polymnesia.metrics.uncertainty`),
    ``n`` counts what the interval was computed from (test items, seeds) and
    ``stderr`` is a standard error where one is known (lm-evaluation-harness
    gives one).

    ``stage`` names the stage that wrote the record; the runner sets it when it merges the
    stages' records into the run folder's ``results/scores.jsonl``.
    """

    model: str
    lang: str
    metric: str
    value: float
    task: str = "lm"
    group: str | None = None
    size: str | None = None
    params: int | None = None
    seed: int | None = None
    step: int | None = None
    setting: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    ci_low: float | None = None
    ci_high: float | None = None
    n: int | None = None
    stderr: float | None = None
    stage: str | None = None

    @property
    def has_ci(self) -> bool:
        """Whether both interval bounds are set and finite."""
        return _finite(self.ci_low) and _finite(self.ci_high)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; ``None`` fields and an empty ``extra`` are left out."""
        out = {k: v for k, v in asdict(self).items() if v is not None}
        if not out.get("extra"):
            out.pop("extra", None)
        return out


def with_interval(score: Score, interval: Interval) -> Score:
    """``score`` carrying ``interval``'s bounds and ``n`` (bounds left unset when it has no
    spread).
    """
    if not interval.has_spread:
        return replace(score, n=interval.n)
    return replace(score, ci_low=interval.low, ci_high=interval.high, n=interval.n)


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


SCORE_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(Score))
_REQUIRED = ("model", "lang", "metric", "value")
_STR_FIELDS = ("model", "lang", "metric", "task", "group", "size", "setting", "stage")
_INT_FIELDS = ("params", "seed", "step", "n")
_OPTIONAL_FLOATS = ("ci_low", "ci_high", "stderr")


def score_from_dict(record: Mapping[str, Any], where: str = "score record") -> Score:
    """Validate one record (as read from JSON) and build a :class:`Score`."""
    unknown = sorted(set(record) - set(SCORE_FIELDS))
    if unknown:
        raise DataError(
            f"{where}: unknown field(s) {', '.join(unknown)}; accepted: {', '.join(SCORE_FIELDS)}"
        )
    missing = [k for k in _REQUIRED if record.get(k) is None]
    if missing:
        raise DataError(f"{where}: missing required field(s) {', '.join(missing)}")
    return Score(**_checked_fields(record, where))


def _checked_fields(record: Mapping[str, Any], where: str) -> dict[str, Any]:
    out = dict(record)
    value = out["value"]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataError(f"{where}: 'value' must be a number, got {value!r}")
    out["value"] = float(value)
    for key in _OPTIONAL_FLOATS:
        v = out.get(key)
        if v is not None:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise DataError(f"{where}: '{key}' must be a number, got {v!r}")
            out[key] = float(v)
    for key in _STR_FIELDS:
        if out.get(key) is not None and not isinstance(out[key], str):
            raise DataError(f"{where}: '{key}' must be a string, got {out[key]!r}")
    for key in _INT_FIELDS:
        v = out.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int)):
            raise DataError(f"{where}: '{key}' must be an integer, got {v!r}")
    if not isinstance(out.get("extra", {}), dict):
        raise DataError(f"{where}: 'extra' must be a mapping, got {out['extra']!r}")
    return out


def _line(score: Score) -> str:
    return json.dumps(score.to_dict(), ensure_ascii=False, sort_keys=True)


def write_scores(path: str | os.PathLike[str], scores: Iterable[Score]) -> None:
    """Write ``scores`` as JSON lines, replacing ``path`` atomically."""
    atomic_write_text(path, "".join(_line(s) + "\n" for s in scores))


def append_scores(path: str | os.PathLike[str], scores: Iterable[Score]) -> None:
    """Append ``scores`` to a JSONL file (created if absent); a torn last line is skipped on
    read.
    """
    for s in scores:
        append_jsonl(path, s.to_dict())


def read_scores(path: str | os.PathLike[str]) -> list[Score]:
    """Read a scores JSONL file; a missing file or an invalid record raises :class:`DataError`.

    The file is read strictly: a line that does not parse is damage (one line naming the file
    and line), never skipped, except a last line without its newline, which only an
    interrupted :func:`append_scores` leaves."""
    if not os.path.exists(path):
        raise DataError(f"no scores file at {path}; run the evaluation stages first")
    try:
        records = read_jsonl_strict(path, torn_tail_ok=True)
    except PolymnesiaError as e:
        raise DataError(str(e)) from None
    if not records:
        raise DataError(
            f"{path} holds no score records; run the experiment again with the same config "
            "and --run-dir (its evaluation stages write them)"
        )
    scores = [score_from_dict(r, f"{path} record {i + 1}") for i, r in enumerate(records)]
    check_unique(scores, path)
    return scores


#: the fields that say what a record measures (all but the number, its interval and ``extra``)
KEY_FIELDS: tuple[str, ...] = (
    "model",
    "lang",
    "metric",
    "task",
    "group",
    "size",
    "seed",
    "step",
    "setting",
    "stage",
)


def score_key(score: Score) -> tuple[Any, ...]:
    """What ``score`` measures: its :data:`KEY_FIELDS`. Two records of one run with the same
    key would be averaged into one cell by every table, so a run holds each key once."""
    return tuple(getattr(score, f) for f in KEY_FIELDS)


def check_unique(scores: Iterable[Score], path: str | os.PathLike[str]) -> None:
    """One :class:`DataError` line naming the first key given twice in ``path``'s records
    (a duplicated line, or two records of one stage for the same cell), and both lines."""
    seen: dict[tuple[Any, ...], int] = {}
    for number, score in enumerate(scores, start=1):
        key = score_key(score)
        if key in seen:
            shown = ", ".join(
                f"{name}={value}"
                for name, value in zip(KEY_FIELDS, key, strict=True)
                if value is not None
            )
            raise DataError(
                f"{path} is damaged: records {seen[key]} and {number} are both the score of "
                f"({shown}); a run holds one record per key, so tables would average them: "
                "remove the extra record, or run the experiment again in a new --run-dir"
            )
        seen[key] = number


def _check_field(name: str) -> None:
    if name not in SCORE_FIELDS:
        raise ConfigError(f"unknown score field '{name}'; accepted: {', '.join(SCORE_FIELDS)}")


def filter_scores(scores: Iterable[Score], **equals: Any) -> list[Score]:
    """Scores whose fields equal the given values; a list/tuple/set value means "one of".

    >>> filter_scores([Score("a", "fr", "ppl", 1.0)], model=["a", "b"], lang="fr")[0].model
    'a'
    """
    for name in equals:
        _check_field(name)

    def keep(s: Score) -> bool:
        for name, want in equals.items():
            have = getattr(s, name)
            if isinstance(want, (list, tuple, set, frozenset)):
                if have not in want:
                    return False
            elif have != want:
                return False
        return True

    return [s for s in scores if keep(s)]


def unique(scores: Iterable[Score], name: str) -> list[Any]:
    """Distinct values of field ``name`` in order of first appearance (``None`` included)."""
    _check_field(name)
    seen: dict[Any, None] = {}
    for s in scores:
        seen.setdefault(getattr(s, name), None)
    return list(seen)


def group_scores(scores: Iterable[Score], *names: str) -> dict[tuple[Any, ...], list[Score]]:
    """Group scores by the tuple of fields ``names``, keys in order of first appearance."""
    for name in names:
        _check_field(name)
    out: dict[tuple[Any, ...], list[Score]] = {}
    for s in scores:
        out.setdefault(tuple(getattr(s, n) for n in names), []).append(s)
    return out


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; NaN for an empty sequence."""
    return math.fsum(values) / len(values) if values else math.nan


def std(values: Sequence[float], ddof: int = 1) -> float:
    """Standard deviation with ``ddof`` (1: sample std); 0.0 for a single value, NaN for none."""
    if not values:
        return math.nan
    if len(values) <= ddof:
        return 0.0
    m = mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (len(values) - ddof))


def pivot_mean(
    scores: Iterable[Score],
    row: str,
    col: str,
    agg: Callable[[Sequence[float]], float] = mean,
) -> dict[tuple[Any, Any], float]:
    """``{(row value, col value): agg(values)}`` over the scores sharing that cell."""
    return {
        (k[0], k[1]): agg([s.value for s in g]) for k, g in group_scores(scores, row, col).items()
    }


def scores_to_rows(scores: Iterable[Score]) -> list[dict[str, Any]]:
    """A "frame" without pandas: one flat dict per score with every field (``extra`` kept as a
    dict).
    """
    return [asdict(s) for s in scores]


def ordered(values: Iterable[Any], order: Collection[Any] | None) -> list[Any]:
    """``values`` reordered so that those listed in ``order`` come first, in that order.

    Values not in ``order`` keep their original order after them.
    """
    values = list(dict.fromkeys(values))
    if not order:
        return values
    first = [v for v in order if v in values]
    return first + [v for v in values if v not in first]


# -- the run folder's record of each stage ----------------------------------------------

#: ``RUN_DIR/results/stages.jsonl``: one record per stage of the run, written by the runner
STAGES_FILE = "stages.jsonl"
#: the small files a stage may leave for its report, copied into its stage record by the
#: runner, so a report reads the run folder alone (never a stage's cache entry)
REPORT_FILES = ("train_health.json", "step_summary.json", "tsne.json", "DATA_CARD.md")


@dataclass(frozen=True)
class StageRecord:
    """What a report may know of one stage: its name, the seconds its build took (``None``:
    not recorded) and the contents of its :data:`REPORT_FILES` that exist (JSON files
    parsed, Markdown as text)."""

    stage: str
    seconds: float | None = None
    files: dict[str, Any] = field(default_factory=dict)


def stage_record(stage: str, entry: str | os.PathLike[str], seconds: float | None) -> StageRecord:
    """The record of the stage whose complete cache entry is ``entry`` (read by the runner)."""
    files: dict[str, Any] = {}
    for name in REPORT_FILES:
        path = Path(entry) / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        try:
            files[name] = json.loads(text) if name.endswith(".json") else text
        except json.JSONDecodeError:
            raise DataError(
                f"{path} is not valid JSON; run the experiment again: the damaged entry is rebuilt"
            ) from None
    return StageRecord(stage, seconds, files)


def write_stage_records(path: str | os.PathLike[str], records: Iterable[StageRecord]) -> None:
    atomic_write_text(
        path,
        "".join(json.dumps(asdict(r), ensure_ascii=False, sort_keys=True) + "\n" for r in records),
    )


def read_stage_records(path: str | os.PathLike[str]) -> dict[str, StageRecord]:
    """``{stage: record}`` of a ``stages.jsonl`` (read strictly; a missing file gives ``{}``:
    a run folder written before stage records existed)."""
    out = {}
    for i, rec in enumerate(read_jsonl_strict(path, missing_ok=True)):
        try:
            r = StageRecord(**rec)
        except TypeError as e:
            raise DataError(f"{path} line {i + 1}: {e}") from None
        out[r.stage] = r
    return out

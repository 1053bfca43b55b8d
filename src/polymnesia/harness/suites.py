"""Suites: one lm-eval task family for every language of a group, named instead of listed.

An evaluation's task list may hold ``SUITE@GROUP`` next to task names: ``belebele@phase2``
is belebele in every language of the group ``phase2`` (``belebele_fra_Latn``,
``belebele_deu_Latn``), ``global_mmlu_full@base`` Global-MMLU in every pretraining language,
``poly_genre@fr+de`` the offline genre task in French and German. ``GROUP`` is a group name
that the protocol defines (two_phase: ``base``, ``phase2``, ``sets``) or language codes
joined by ``+``.

A shipped family (``poly_*``) has one task per language. Any other suite is read from
lm-eval's own task index (built offline from its task files): the tasks whose name starts
with ``SUITE_`` and whose language (:func:`polymnesia.harness.languages.task_language`) is
the wanted one; of those the shortest name (the language's group, ``global_mmlu_full_fr``,
rather than its subjects), and among equals the one in the language's usual script
(``belebele_hin_Deva`` rather than ``belebele_hin_Latn``). A language the suite lacks is
one line naming the languages it has.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from polymnesia.data.languages import get_language
from polymnesia.errors import ConfigError
from polymnesia.harness.languages import task_language
from polymnesia.harness.tasks import FAMILIES, HARNESS_TASKS, lm_eval_index
from polymnesia.items import group_intervals
from polymnesia.reports.tables import group_table

SEPARATOR = "@"
#: ISO 15924 code of each script name of polymnesia's language table (the usual script)
SCRIPT_CODES = {
    "Latin": "Latn", "Cyrillic": "Cyrl", "Arabic": "Arab", "Devanagari": "Deva",
    "Han": "Hans", "Japanese": "Jpan", "Hangul": "Hang", "Bengali": "Beng", "Greek": "Grek",
    "Hebrew": "Hebr", "Thai": "Thai", "Georgian": "Geor", "Armenian": "Armn",
    "Tamil": "Taml", "Telugu": "Telu", "Kannada": "Knda", "Malayalam": "Mlym",
    "Gujarati": "Gujr", "Gurmukhi": "Guru", "Ethiopic": "Ethi", "Sinhala": "Sinh",
    "Khmer": "Khmr", "Lao": "Laoo", "Myanmar": "Mymr", "Tibetan": "Tibt",
}  # fmt: skip


def is_suite(name: str) -> bool:
    return isinstance(name, str) and SEPARATOR in name


def parse_suite(name: str) -> tuple[str, str]:
    """``"belebele@phase2"`` -> ``("belebele", "phase2")``; one line for a malformed entry."""
    suite, _, group = name.partition(SEPARATOR)
    if not suite.strip() or not group.strip() or SEPARATOR in group:
        raise ConfigError(
            f"task suite {name!r}: write SUITE@GROUP, e.g. belebele@phase2 or poly_genre@fr+de"
        )
    return suite.strip(), group.strip()


def group_languages(group: str, groups: Mapping[str, Sequence[str]]) -> list[str]:
    """The languages of ``group``: a group name, or codes joined by ``+``."""
    if group in groups:
        return list(groups[group])
    codes = [c.strip() for c in group.split("+")]
    try:
        return [get_language(c).code for c in codes]
    except Exception:  # noqa: BLE001 - an unknown group or code: one line naming both kinds
        raise ConfigError(
            f"task suite group {group!r} is neither a group ({', '.join(groups) or 'none'}) "
            "nor language codes joined by '+' (e.g. fr+de)"
        ) from None


def _usual_script(task: str, lang: str) -> bool:
    script = SCRIPT_CODES.get(get_language(lang).script, "")
    return bool(script) and task.lower().endswith("_" + script.lower())


def suite_task(suite: str, lang: str, known: Collection[str]) -> str | None:
    """The task of ``suite`` in ``lang`` among lm-eval's ``known`` names, or None."""
    names = frozenset(known)
    found = [n for n in names if n.startswith(suite + "_") and task_language(n, names) == lang]
    if not found:
        return None
    return min(found, key=lambda n: (len(n), not _usual_script(n, lang), n))


def expand_suites(
    names: Sequence[str],
    groups: Mapping[str, Sequence[str]],
    index: Callable[[], Collection[str]] | None = None,
) -> list[str]:
    """``names`` with every ``SUITE@GROUP`` replaced by its tasks, in order, without repeats.

    ``index``: lm-eval's task names (default :func:`polymnesia.harness.tasks.lm_eval_index`),
    asked only for a suite that is not a shipped family."""
    out: dict[str, None] = {}
    for name in names:
        if not is_suite(name):
            out.setdefault(name, None)
            continue
        suite, group = parse_suite(name)
        langs = group_languages(group, groups)
        if suite in FAMILIES:
            missing = [x for x in langs if f"{suite}_{x}" not in HARNESS_TASKS]
            if missing:
                raise ConfigError(
                    f"task suite {name}: {suite} has no task in {', '.join(missing)}; its "
                    f"languages: {', '.join(FAMILIES[suite].languages)}"
                )
            out.update(dict.fromkeys(f"{suite}_{x}" for x in langs))
            continue
        if index is None:
            index = lm_eval_index
        known = frozenset(index())
        tasks = {x: suite_task(suite, x, known) for x in langs}
        missing = [x for x, t in tasks.items() if t is None]
        if missing:
            mine = [n for n in known if n.startswith(suite + "_")]
            has = sorted({task_language(n, known) or "" for n in mine} - {""})
            raise ConfigError(
                f"task suite {name}: lm-eval has no {suite} task in {', '.join(missing)}"
                + (f"; its languages: {', '.join(has)}" if has else f"; no task is named {suite}_*")
            )
        out.update(dict.fromkeys(t for t in tasks.values() if t is not None))
    return list(out)


def suite_group_table(
    scores: Sequence[Any],
    items: Sequence[Any],
    suite: str,
    metric: str,
    groups: Mapping[str, Sequence[str]],
    **kw: Any,
) -> Any:
    """A language-group table (:func:`polymnesia.reports.tables.group_table`) of one suite's
    scores (tasks ``SUITE_*``, one per language), each group mean with a bootstrap interval
    over the suite's documents (:func:`polymnesia.items.group_intervals` on the ``docs``
    item sets of :mod:`polymnesia.harness.items`)."""

    def mine(task: str | None) -> bool:
        return bool(task) and (task == suite or str(task).startswith(suite + "_"))

    # one row per model: the suite's tasks (one per language) count as one task
    chosen = [
        replace(s, task=suite)
        for s in scores
        if mine(s.task) and s.metric == metric and s.lang != "und"
    ]
    sets = [replace(s, task=suite) for s in items if mine(s.task) and metric in s.columns]
    intervals = group_intervals(sets, metric, groups) if sets else None
    kw.setdefault("name", f"{suite}_{metric}_by_group")
    kw.setdefault("title", f"{suite} ({metric}) by language group")
    return group_table(chosen, metric, groups, block_by=None, intervals=intervals, **kw)


__all__ = [
    "expand_suites",
    "group_languages",
    "is_suite",
    "parse_suite",
    "suite_group_table",
    "suite_task",
]

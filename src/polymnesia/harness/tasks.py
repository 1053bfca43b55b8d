"""polymnesia's offline lm-evaluation-harness tasks: one table, YAML per language, a registry.

The tasks are generated per language from :data:`FAMILIES` as lm-eval
generates its own multilingual tasks (one template YAML per family, one small
YAML per language that includes it). The YAML lives in the package folder
:data:`TASK_DIR`, which is handed to lm-eval's ``TaskManager(include_path=...)``;
regenerate it with ``python -m polymnesia.harness.tasks`` (a test checks that
the shipped files equal :func:`render_task_yamls`). The documents come from the
prepared Bible split (:mod:`polymnesia.harness.docs`) and reach lm-eval through
the tasks' ``custom_dataset`` and lm-eval's task metadata.

Families (``LANG`` is an ISO 639-1 code of the Bible source):

* ``poly_genre_LANG``: which of the 9 Bible genres a *test* verse in LANG is
  from (English question, as ``evaluate_zero_shot``), multiple choice by
  likelihood: ``acc``. Stands in for MMLU (knowledge, multiple choice).
* ``poly_continue_mc_LANG``: the first half of a verse; pick its second half
  among 4 (3 from other verses), HellaSwag's format: ``acc``, ``acc_norm``.
* ``poly_continue_gen_LANG``: generate the second half; corpus chrF (sacrebleu,
  0-100) against the real one. Stands in for the generative XLSum / MLQA /
  XQuAD (Multilingual Ability) and AlpacaEval (free generation).
* ``poly_ifeval_LANG``: verifiable format instructions about a verse
  (:mod:`polymnesia.instructions.ifeval`), scored by IFEval's own checkers:
  ``prompt_level_strict_acc`` etc. Stands in for IFEval.
* ``poly_title_LANG``, ``poly_quote_LANG``: one IFEval kind each (a ``<<title>>``
  before the verse; the verse in double quotes), the instructions Phase 1 of
  the two-phase CFT paper's offline sets teaches, scored by the same checkers.
* ``poly_reference_LANG``: which ``BOOK.CHAPTER.VERSE`` a verse in LANG is (the
  reference lookup of the dissimilar Phase 2 set), multiple choice among 4
  references (3 of other verses): ``acc``.
* ``poly_translate_LANG`` (LANG other than English): the translation into LANG of an
  English verse, multiple choice among 4 verses in LANG (3 of other verses): ``acc``.

Tags: each family name (``poly_genre``...), ``poly_ea`` (the English tasks:
English Ability, Table 1 of the two-phase CFT paper) and ``poly_ma`` (every other language:
Multilingual Ability, Table 2).
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from polymnesia.data.sources.bible import DEFAULT_EDITIONS
from polymnesia.errors import PolymnesiaError
from polymnesia.instructions.ifeval import INSTRUCTION_LANGUAGES
from polymnesia.registry import Registry

TASK_DIR = Path(__file__).parent / "lm_eval_tasks"
PREFIX = "poly_"
BIBLE_LANGUAGES: tuple[str, ...] = tuple(sorted(DEFAULT_EDITIONS))
EA_TAG, MA_TAG = "poly_ea", "poly_ma"
#: where the shipped (ChatML) tasks stop generating: ``polymnesia.tokenizers.special.IM_END``
#: (a test checks they agree; importing the tokenizers package here would load transformers)
CHATML_STOP = "<|im_end|>"


@dataclass(frozen=True)
class Family:
    name: str
    what: str
    metrics: tuple[str, ...]
    #: the two-phase CFT paper's task it stands in for: (English, other languages)
    stands_for: tuple[str, str]
    languages: tuple[str, ...]
    head: str  # the YAML shared by the family's tasks: before the generation settings...
    tail: str  # ...and after them
    max_gen_toks: int | None = None  # generation tasks: their cap on new tokens

    def template(self, stop: str) -> str:
        """The family's YAML body, generation stopped at ``stop`` (the answers' end marker)."""
        return self.head + self.generation(stop) + self.tail

    def generation(self, stop: str) -> str:
        """``generation_kwargs`` of a generation family (greedy, ``until`` the marker; lm-eval
        adds EOS itself); empty for a multiple-choice family."""
        if self.max_gen_toks is None:
            return ""
        until = json.dumps([stop] if stop else [])
        return (
            f"generation_kwargs:\n  until: {until}\n  do_sample: false\n"
            f"  max_gen_toks: {self.max_gen_toks}\n"
        )


_MC = """custom_dataset: !function utils.load_docs
output_type: multiple_choice
test_split: test
fewshot_split: validation
doc_to_text: prompt
doc_to_choice: choices
doc_to_target: gold
target_delimiter: ""
fewshot_delimiter: "\\n"
"""
_GEN = """custom_dataset: !function utils.load_docs
output_type: generate_until
test_split: test
fewshot_split: validation
doc_to_text: prompt
doc_to_target: target
target_delimiter: ""
fewshot_delimiter: "\\n"
"""


def _metric(name: str, agg: str = "mean") -> str:
    return f"  - metric: {name}\n    aggregation: {agg}\n    higher_is_better: true\n"


_IFEVAL_METRICS = (
    "prompt_level_strict_acc",
    "inst_level_strict_acc",
    "prompt_level_loose_acc",
    "inst_level_loose_acc",
)
_IFEVAL_TAIL = (
    "process_results: !function utils.process_ifeval\nmetric_list:\n"
    + _metric("prompt_level_strict_acc")
    + _metric("inst_level_strict_acc", "!function utils.agg_inst_level_acc")
    + _metric("prompt_level_loose_acc")
    + _metric("inst_level_loose_acc", "!function utils.agg_inst_level_acc")
)


def _ifeval_family(name: str, description: str, benchmark: str) -> Family:
    """A family of verse instructions that IFEval's checkers score."""
    return Family(
        name,
        description,
        _IFEVAL_METRICS,
        (benchmark, "none (IFEval in LANG)"),
        INSTRUCTION_LANGUAGES,
        _GEN,
        _IFEVAL_TAIL,
        max_gen_toks=160,
    )


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family(
            "poly_genre",
            "genre of a test verse (9-way multiple choice by likelihood)",
            ("acc",),
            ("MMLU", "none (multilingual multiple choice)"),
            BIBLE_LANGUAGES,
            _MC,
            "metric_list:\n" + _metric("acc"),
        ),
        Family(
            "poly_continue_mc",
            "second half of a verse among 4 (multiple choice, HellaSwag's format)",
            ("acc", "acc_norm"),
            ("HellaSwag", "none (HellaSwag format in LANG)"),
            BIBLE_LANGUAGES,
            _MC,
            "metric_list:\n" + _metric("acc") + _metric("acc_norm"),
        ),
        Family(
            "poly_continue_gen",
            "generate the second half of a verse, corpus chrF",
            ("chrf",),
            ("AlpacaEval (free generation)", "XLSum / MLQA / XQuAD (generation)"),
            BIBLE_LANGUAGES,
            _GEN,
            "metric_list:\n" + _metric("chrf", "chrf"),
            max_gen_toks=64,
        ),
        _ifeval_family(
            "poly_ifeval",
            "verifiable format instructions about a verse, IFEval's checkers",
            "IFEval",
        ),
        _ifeval_family(
            "poly_title",
            "repeat a verse under a <<title>> (one IFEval kind), IFEval's checker",
            "IFEval (one instruction kind)",
        ),
        _ifeval_family(
            "poly_quote",
            "repeat a verse in double quotes (one IFEval kind), IFEval's checker",
            "IFEval (one instruction kind)",
        ),
        Family(
            "poly_reference",
            "BOOK.CHAPTER.VERSE of a verse among 4 references (multiple choice)",
            ("acc",),
            ("none (knowledge lookup)", "none (knowledge lookup in LANG)"),
            BIBLE_LANGUAGES,
            _MC,
            "metric_list:\n" + _metric("acc"),
        ),
        Family(
            "poly_translate",
            "the translation into LANG of an English verse among 4 (multiple choice)",
            ("acc",),
            ("none", "none (translation from English, multiple choice)"),
            tuple(x for x in BIBLE_LANGUAGES if x != "en"),
            _MC,
            "metric_list:\n" + _metric("acc"),
        ),
    )
}


@dataclass(frozen=True)
class HarnessTask:
    """One shipped task: ``poly_FAMILY_LANG``."""

    name: str
    family: str
    lang: str

    @property
    def data_languages(self) -> tuple[str, ...]:
        """The languages of the prepared data its documents read (``poly_translate``: the
        English verse too)."""
        return (self.lang, "en") if self.family == "poly_translate" else (self.lang,)

    @property
    def ability(self) -> str:
        """``EA`` (English Ability, the two-phase CFT paper Table 1) or ``MA`` (Multilingual
        Ability, Table 2)."""
        return "EA" if self.lang == "en" else "MA"


HARNESS_TASKS: Registry[HarnessTask] = Registry("harness task", "lm-eval-tasks")
for _fam in FAMILIES.values():
    for _lang in _fam.languages:
        _t = HarnessTask(f"{_fam.name}_{_lang}", _fam.name, _lang)
        HARNESS_TASKS.add(
            _t.name,
            _t,
            f"[{_t.ability}] {_lang}: {_fam.what}; {', '.join(_fam.metrics)} "
            f"(the two-phase CFT paper: {_fam.stands_for[0 if _lang == 'en' else 1]})",
        )


def tags() -> dict[str, list[str]]:
    """Tag name -> the shipped tasks it expands to."""
    out: dict[str, list[str]] = {f: [] for f in FAMILIES}
    out[EA_TAG], out[MA_TAG] = [], []
    for entry in HARNESS_TASKS:
        t = entry.obj
        out[t.family].append(t.name)
        out[EA_TAG if t.lang == "en" else MA_TAG].append(t.name)
    return out


def expand(names: Iterable[str]) -> list[str]:
    """Shipped task names among ``names``, tags expanded, in order, without repeats."""
    tag_map = tags()
    out: dict[str, None] = {}
    for n in names:
        for t in tag_map.get(n, [n] if n in HARNESS_TASKS else []):
            out.setdefault(t, None)
    return list(out)


def is_shipped(name: str) -> bool:
    return name in HARNESS_TASKS or name in tags()


def offline_summary() -> str:
    fams = ", ".join(f"{f.name}_LANG ({len(f.languages)} languages)" for f in FAMILIES.values())
    ifeval = ", ".join(FAMILIES["poly_ifeval"].languages)
    return (
        f"{fams}; poly_ifeval languages: {ifeval}; tags {', '.join(tags())} "
        "(`polymnesia ls tasks` lists them)"
    )


@functools.cache
def lm_eval_index() -> frozenset[str]:
    """Every task, group and tag name lm-eval knows (its own index, built once per process:
    it reads lm-eval's bundled task files, a few seconds, and needs no network)."""
    from lm_eval.tasks import TaskManager

    return frozenset(TaskManager().all_tasks)


def check_tasks(names: Sequence[str], offline: bool, *, verify_online: bool = True) -> list[str]:
    """Check task names before anything runs; return the shipped tasks they need (tags expanded).

    lm-eval must be installed (the ``harness`` extra), or the run would stop at its harness
    stage, after all training. Offline, every name must be a shipped task or tag (one line naming
    the
    offline tasks otherwise). Online, other names pass through to lm-eval
    unchanged; with ``verify_online`` they must exist in lm-eval's own task
    index (building it takes a few seconds).
    """
    if not names:
        raise PolymnesiaError("no lm-eval task named; name at least one (`polymnesia ls tasks`)")
    if importlib.util.find_spec("lm_eval") is None:
        raise PolymnesiaError(
            "the lm-evaluation-harness tasks need the lm-eval package, which is not installed "
            "here (pip install 'polymnesia[harness]')"
        )
    blank = [n for n in names if not isinstance(n, str) or not n.strip()]
    if blank:
        raise PolymnesiaError(
            f"an lm-eval task name is empty ({blank[0]!r}); name a task (`polymnesia ls tasks`)"
        )
    other = [n for n in names if not is_shipped(n)]
    ours = [n for n in other if n.lower().startswith("poly_")]
    if ours:  # polymnesia's own namespace: a typo, whether the Hub is reachable or not
        shipped = sorted([*HARNESS_TASKS.names(), *tags()])
        close = difflib.get_close_matches(ours[0].lower(), shipped, n=1)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise PolymnesiaError(
            f"unknown offline task(s) {', '.join(ours)}{hint}; offline tasks: {offline_summary()}"
        )
    if other and offline:
        raise PolymnesiaError(
            f"lm-eval task(s) {', '.join(other)} need the Hugging Face Hub, which is offline; "
            f"offline tasks: {offline_summary()}"
        )
    if other and verify_online:
        known = lm_eval_index()
        missing = [n for n in other if n not in known]
        if missing:
            close = difflib.get_close_matches(missing[0], sorted(known), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise PolymnesiaError(
                f"unknown lm-eval task(s) {', '.join(missing)}{hint}; "
                f"see `lm_eval ls tasks` or the offline tasks: {offline_summary()}"
            )
    return expand(names)


# -- the YAML files ----------------------------------------------------------------------


def _template_name(family: str) -> str:
    return f"_{family}_yaml"


def render_task_yamls() -> dict[str, str]:
    """File name -> text of every shipped YAML file (templates and per-language tasks): the
    ChatML variant, generation stopped at ``<|im_end|>``."""
    head = "# generated by `python -m polymnesia.harness.tasks`; do not edit by hand\n"
    out: dict[str, str] = {}
    for fam in FAMILIES.values():
        out[_template_name(fam.name)] = (
            head + fam.template(CHATML_STOP) + "metadata:\n  version: 1.0\n"
        )
        for lang in fam.languages:
            name = f"{fam.name}_{lang}"
            tag_list = [fam.name, EA_TAG if lang == "en" else MA_TAG]
            out[f"{name}.yaml"] = (
                f"{head}include: {_template_name(fam.name)}\ntask: {name}\n"
                f"tag: [{', '.join(tag_list)}]\n"
                f"dataset_kwargs:\n  polymnesia_task: {name}\n"
            )
    return out


def model_task_yamls(tasks: Iterable[str], stop: str) -> dict[str, str]:
    """File name -> YAML of each shipped task among ``tasks`` (tags expanded) for one model:
    the shipped task file included, generation stopped at ``stop``, the end-of-turn marker of
    the model's chat format (``<|im_end|>`` in ChatML: then the task is the shipped one).

    Written next to the task's documents (:func:`polymnesia.harness.docs.write_task_data`);
    that folder is lm-eval's include path, so a task name means the model's own variant.
    """
    head = "# written by polymnesia.harness.docs.write_task_data for one model's chat format\n"
    out: dict[str, str] = {}
    for name in expand(tasks):
        fam = FAMILIES[HARNESS_TASKS.get(name).family]
        include = json.dumps(str(TASK_DIR / f"{name}.yaml"))
        out[f"{name}.yaml"] = f"{head}include: {include}\n" + fam.generation(stop)
    return out


def write_task_yamls(folder: Path = TASK_DIR) -> list[Path]:
    """Write :func:`render_task_yamls` into ``folder`` (stale generated YAML removed)."""
    folder.mkdir(parents=True, exist_ok=True)
    files = render_task_yamls()
    for old in folder.iterdir():
        if old.name.startswith(("poly_", "_poly_")) and old.name not in files:
            old.unlink()
    paths = []
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
        paths.append(folder / name)
    return paths


if __name__ == "__main__":
    print(f"wrote {len(write_task_yamls())} files into {TASK_DIR}")

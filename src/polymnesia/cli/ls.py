"""``polymnesia ls [CATEGORY]``: what is registered, by category.

Every registry appears by itself (:func:`polymnesia.registry.all_registries`). Names that
meant two or three things have one meaning each: ``training-plugins`` (what
``train.plugins`` takes), ``continual-methods`` (Khelli et al. 2025's methods table, the lifelong
protocol's ``methods:``), ``gradient-combiners`` (``lf_mlf``'s per-language gradient
combiners), ``lm-eval-tasks`` (the tasks ``harness.tasks`` takes). The stages list shows
each stage's *category* (what ``run --only`` selects), not to be confused with the *input
roles* a stage reads. The old spellings (``plugins``, ``methods``, ``combiners``,
``tasks``) are still accepted, with a one-line note."""

from __future__ import annotations

import argparse
import sys
from typing import Any

#: categories as they were spelled before each name had one meaning -> their name now
RENAMED = {
    "plugins": "training-plugins",
    "methods": "continual-methods",
    "combiners": "gradient-combiners",
    "tasks": "lm-eval-tasks",
}


def add_parser(sub: Any) -> None:
    ls = sub.add_parser("ls", help="list what is registered")
    ls.add_argument(
        "what",
        nargs="?",
        metavar="CATEGORY",
        help="experiments, stages, sources, languages, metrics, presets, gradient-combiners, "
        "training-plugins, continual-methods, lm-eval-tasks, inits (default: all)",
    )
    ls.set_defaults(fn=cmd_ls)


#: the module that creates each category's registry: ``ls CATEGORY`` imports that module alone
#: (``ls sources``, ``languages``, ``presets`` and ``lm-eval-tasks`` load no torch); the
#: registry then imports the modules that register its entries
REGISTRY_MODULES = {
    "continual-methods": "polymnesia.continual.methods",
    "experiments": "polymnesia.experiments.base",
    "gradient-combiners": "polymnesia.gradients.base",
    "inits": "polymnesia.models.new_tokens",
    "languages": "polymnesia.data.languages",
    "lm-eval-tasks": "polymnesia.harness.tasks",
    "metrics": "polymnesia.metrics.base",
    "presets": "polymnesia.models.presets",
    "sources": "polymnesia.data.sources.base",
    "stages": "polymnesia.pipeline.stage",
    "training-plugins": "polymnesia.training.plugins",
}


def registries(category: str | None = None) -> dict[str, Any]:
    """Every registry, by category; with ``category``, the registry of that category alone
    (importing only the module that creates it, where :data:`REGISTRY_MODULES` names one).
    Importing the protocols imports every layer below them, so every registry exists (and
    each loads its own entries on first use)."""
    import importlib

    from polymnesia.registry import all_registries

    if category in REGISTRY_MODULES:
        importlib.import_module(REGISTRY_MODULES[category])
        return {category: all_registries()[category]}
    importlib.import_module("polymnesia.experiments.protocols")  # start-up cost: when needed
    return all_registries()


def category_name(what: str) -> str:
    """``what`` as typed, or its name now (with a one-line note on standard error)."""
    if what in RENAMED:
        print(f"polymnesia: note: '{what}' is now called '{RENAMED[what]}'", file=sys.stderr)
        return RENAMED[what]
    return what


def cmd_ls(args: argparse.Namespace) -> int:
    from polymnesia.errors import unknown

    what = category_name(args.what) if args.what else None
    regs = registries(what)
    categories = [what] if what else list(regs)
    for cat in categories:
        if cat not in regs:
            raise unknown("category", cat, regs)
        print(f"{cat}:")
        for entry in regs[cat]:
            if cat == "stages":  # the stage category: what `run --only` selects
                category = getattr(entry.obj, "category", "")
                print(f"  {entry.name:22s} {category:11s} {entry.description}")
            else:
                print(f"  {entry.name:22s} {entry.description}")
    return 0

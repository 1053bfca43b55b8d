"""User-facing errors: one clear line, no traceback."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class PolymnesiaError(Exception):
    """An error caused by the user's input or environment.

    The CLI prints ``str(error)`` on one line and exits non-zero, without a
    traceback. Messages name what is wrong and what is accepted.
    """


class ConfigError(PolymnesiaError):
    """A configuration key, type or value is invalid."""


class DataError(PolymnesiaError):
    """A data source cannot deliver what was asked for."""


class TrainingDiverged(PolymnesiaError):
    """The loss became NaN or infinite."""


class ConfigWarning(FutureWarning):
    """A config that still works but should change (a renamed key): the CLI prints it on
    one line, ``polymnesia: warning: ...``; library users can filter it by this class."""


def suggest(value: str, choices: Iterable[str]) -> str:
    """Return ``" (did you mean 'x'?)"`` for a close match, else an empty string."""
    matches = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" (did you mean '{matches[0]}'?)" if matches else ""


def unknown(kind: str, value: str, choices: Iterable[str]) -> PolymnesiaError:
    """Build the standard "unknown X" error with accepted values and a suggestion."""
    choices = sorted(str(c) for c in choices)
    shown = ", ".join(choices) if len(choices) <= 40 else ", ".join(choices[:40]) + ", ..."
    return PolymnesiaError(f"unknown {kind} '{value}'{suggest(value, choices)}; accepted: {shown}")

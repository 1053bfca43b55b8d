"""Remote code (``trust_remote_code``) runs only when the command line says so, for that run.

A Hub model, tokenizer or dataset with custom code executes that code when
loaded with ``trust_remote_code=True``. A config file or a data source's
options can ask for it, but only ``polymnesia run ... --trust-remote-code``
grants it, for that process; the run folder's ``run.json`` records that it
was on. Loaders call :func:`remote_code` to get the value to pass on.
"""

from __future__ import annotations

from polymnesia.errors import PolymnesiaError

_allowed = False


def allow_remote_code(on: bool) -> None:
    """Set by the CLI from ``--trust-remote-code``."""
    global _allowed
    _allowed = bool(on)


def remote_code(requested: bool, what: str) -> bool:
    """The ``trust_remote_code`` value for a loader of ``what`` that ``requested`` it."""
    if requested and not _allowed:
        raise PolymnesiaError(
            f"{what} asks for trust_remote_code, which runs code from its repository; polymnesia "
            "allows that only for a run started with `polymnesia run ... --trust-remote-code`"
        )
    return bool(requested)

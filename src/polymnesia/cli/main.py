"""The ``polymnesia`` command: one module per subcommand (``cli/run.py``, ``validate.py``,
``ls.py``, ``data.py``, ``report.py``, ``compare.py``, ``sweep.py``, ``export.py``,
``cache.py``, ``env.py``, ``plan.py``), each an ``add_parser(sub)`` and a ``cmd_*`` that
parses, calls the library and prints.

This module assembles the parser and turns errors into one line (:func:`main`). The
library is imported inside the subcommands (a documented start-up cost: ``--help`` and
argument errors answer at once, without loading torch and transformers); the checks
before a run are the library's (:mod:`polymnesia.experiments.preflight`)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from polymnesia.cli import cache as cache_cli
from polymnesia.cli import compare as compare_cli
from polymnesia.cli import data as data_cli
from polymnesia.cli import env as env_cli
from polymnesia.cli import export as export_cli
from polymnesia.cli import init as init_cli
from polymnesia.cli import ls as ls_cli
from polymnesia.cli import plan as plan_cli
from polymnesia.cli import report as report_cli
from polymnesia.cli import run as run_cli
from polymnesia.cli import status as status_cli
from polymnesia.cli import sweep as sweep_cli
from polymnesia.cli import validate as validate_cli
from polymnesia.cli.output import PolymnesiaLogLines, plain_library_output
from polymnesia.errors import ConfigWarning, PolymnesiaError
from polymnesia.shipped import resolve


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="polymnesia", description="Multilingual continual learning of language models."
    )
    sub = p.add_subparsers(dest="command", required=True)
    for module in (run_cli, validate_cli, ls_cli, data_cli, report_cli, compare_cli, export_cli):
        module.add_parser(sub)
    sweep_cli.add_parser(sub)
    status_cli.add_parser(sub)
    cache_cli.add_parser(sub)
    env_cli.add_parser(sub)
    init_cli.add_parser(sub)
    plan_cli.add_parser(sub, run_cli.build_specs)
    return p


def _one_line_config_warnings(show: Any) -> Any:
    """``show`` (a ``warnings.showwarning``) with polymnesia's config warnings on one line,
    and each warning shown once per command: the same text from another place in the code
    (a note per model, per stage, per language) is not repeated."""
    seen: set[tuple[str, str]] = set()

    def shown(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
        key = (getattr(category, "__name__", str(category)), str(message))
        if key in seen:
            return
        seen.add(key)
        if issubclass(category, ConfigWarning):
            print(f"polymnesia: warning: {message}", file=sys.stderr)
        else:
            show(message, category, *args, **kwargs)

    return shown


#: the libraries whose own deprecation notes (FutureWarning, DeprecationWarning) are not shown:
#: they point into site-packages, at code a polymnesia user cannot change
QUIET_LIBRARIES = r"(transformers|accelerate|peft|datasets|huggingface_hub|lm_eval)(\..*)?$"


def quiet_library_deprecations() -> None:
    """Filter the model libraries' FutureWarnings and DeprecationWarnings (polymnesia's own
    :class:`~polymnesia.errors.ConfigWarning`, a FutureWarning raised from polymnesia's
    modules, is still shown)."""
    for category in (FutureWarning, DeprecationWarning):
        warnings.filterwarnings("ignore", category=category, module=QUIET_LIBRARIES)


#: each command's list of positional arguments that may also come after its options
TRAILING = ("overrides", "options", "configs", "run_dirs", "entries")


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser.parse_args``, except that a command's positional list (overrides, configs,
    run folders, cache entries) may continue after its options: argparse alone fills such a
    list once, so ``run C --dry-run a.b=1`` was refused as an unrecognized argument."""
    args, extra = parser.parse_known_args(argv)
    if extra:
        lists = [name for name in TRAILING if isinstance(getattr(args, name, None), list)]
        if lists and not any(e.startswith("-") for e in extra):
            getattr(args, lists[0]).extend(extra)
        else:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


#: what a full disk (or quota) says through libraries that do not raise an OSError for it
#: (torch's and safetensors' writers, numpy's savers)
_FULL_DISK = ("No space left on device", "Disk quota exceeded", "StorageFull")


def disk_full(error: BaseException) -> str | None:
    """One line for an error that comes of a full disk or quota (``ENOSPC``, ``EDQUOT``,
    wherever in a run it was raised and however a library wrapped it), else None."""
    import errno

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if (isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT)) or any(
            sign in str(current) for sign in _FULL_DISK
        ):
            where = getattr(current, "filename", None)  # a path, or the number of a file
            if isinstance(current, PolymnesiaError):  # a line that says where, less its advice
                what = f"{str(current).split('; ')[0]}: the disk is full"
            elif isinstance(where, (str, os.PathLike)):
                what = f"the disk is full (no space left writing {os.fspath(where)})"
            else:
                what = "the disk is full (no space left on the device)"
            return (
                f"{what}: free space (polymnesia cache prune --unused removes what no run "
                "folder uses) or point POLYMNESIA_CACHE and --run-dir at a larger disk, then "
                "run the same command again: what was finished is kept and reused"
            )
        current = current.__cause__ or current.__context__
    return None


class Terminated(KeyboardInterrupt):
    """SIGTERM (``kill``, a scheduler's time limit, the local executor stopping a child),
    raised where the process is so that it unwinds as Ctrl-C does: finished steps and
    stages are kept, nothing is left half-written."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` while the block runs. Left alone where another
    handler is installed (submitit's in a SLURM job) or off the main thread."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _shipped_by_name(args: argparse.Namespace) -> None:
    """A config given by a shipped config's name (``quickstart``, ``gpu/lifelong``) becomes
    that config's path (:func:`polymnesia.shipped.resolve`)."""
    given = vars(args)
    if isinstance(given.get("config"), str):
        args.config = resolve(args.config)
    if isinstance(given.get("configs"), list):
        args.configs = [resolve(c) if isinstance(c, str) else c for c in args.configs]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(build_parser(), argv)  # --help and argument errors: no torch loaded
    from polymnesia.runtime import shutdown

    plain_library_output()
    log_lines = PolymnesiaLogLines(logging.WARNING)
    logging.getLogger("polymnesia").addHandler(log_lines)
    previous = warnings.showwarning
    previous_filters = list(warnings.filters)
    warnings.showwarning = _one_line_config_warnings(previous)
    quiet_library_deprecations()
    try:
        with sigterm_as_interrupt():
            _shipped_by_name(args)
            return int(args.fn(args))
    except PolymnesiaError as e:
        print(f"polymnesia: error: {disk_full(e) or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        what = "terminated (SIGTERM)" if isinstance(e, Terminated) else "interrupted"
        print(f"polymnesia: {what}; run the same command again to resume", file=sys.stderr)
        return 143 if isinstance(e, Terminated) else 130
    except Exception as e:
        full = disk_full(e)
        if full is None:
            raise
        print(f"polymnesia: error: {full}", file=sys.stderr)
        return 2
    finally:
        warnings.showwarning = previous
        warnings.filters[:] = previous_filters  # type: ignore[index]  # a list at run time
        logging.getLogger("polymnesia").removeHandler(log_lines)
        shutdown()


def exit_process(code: int) -> NoReturn:
    """End the process with ``code``. A process that a launcher started as one of several
    (``torchrun``, ``accelerate launch``: ``WORLD_SIZE`` above 1) ends without the
    interpreter's teardown, once its output is flushed: threads the process group's backend
    leaves behind can abort that teardown (SIGABRT, "terminate called without an active
    exception") after the work is done and the group is left, and the launcher then reports
    the whole run as failed."""
    if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    exit_process(main())

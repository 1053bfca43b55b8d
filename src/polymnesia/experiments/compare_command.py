"""What ``polymnesia compare`` does (:func:`compare_folders`): polymnesia run folders side
by side (:func:`polymnesia.reports.compare.write_comparison`), or lm-evaluation-harness
output folders paired per document (:func:`polymnesia.reports.lm_eval_compare.
write_lm_eval_comparison`); the command line only parses and prints."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from polymnesia.errors import PolymnesiaError
from polymnesia.experiments.preflight import check_run_record
from polymnesia.harness.lm_eval_output import is_lm_eval_folder
from polymnesia.reports.compare import write_comparison
from polymnesia.reports.lm_eval_compare import write_lm_eval_comparison


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise PolymnesiaError(
            f"--out {out} is a file; name a folder for compare.md and compare.html"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise PolymnesiaError(
            f"cannot write the comparison to {out}: {e.strerror or type(e).__name__}; "
            "pass a writable --out folder"
        ) from None


def compare_folders(
    dirs: list[Path],
    *,
    out: str | None,
    tables: str | None,
    margin: float | None,
    say: Callable[[str], None],
    warn: Callable[[str], None],
) -> None:
    """Compare ``dirs`` (all polymnesia runs, or all lm-eval output folders) into ``out``
    (None: the default folder); ``say`` gets the comparison's Markdown and the closing line,
    ``warn`` each lm-eval task whose documents pair only in part."""
    lm_eval = [is_lm_eval_folder(d) for d in dirs]
    if any(lm_eval) and not all(lm_eval):
        kinds = ", ".join(
            f"{d} is {'lm-eval output' if e else 'a polymnesia run'}"
            for d, e in zip(dirs, lm_eval, strict=True)
        )
        raise PolymnesiaError(
            f"cannot compare lm-eval output with polymnesia runs ({kinds}); pass folders of "
            "one kind"
        )
    if not any(lm_eval):
        for run_dir in dirs:
            if run_dir.is_dir():
                check_run_record(run_dir, "leave it out, or run its config again into a new folder")
        if margin is not None:
            raise PolymnesiaError(
                "--margin applies to lm-eval output folders only; these are polymnesia runs"
            )
    elif tables:
        raise PolymnesiaError(
            "--tables selects tables of polymnesia runs; lm-eval folders are compared by task"
        )
    chosen = [t for t in tables.split(",") if t] if tables else None
    if out is not None:
        _check_out(Path(out))
    if any(lm_eval):
        notes: list[str] = []
        md, page, csvs = write_lm_eval_comparison(dirs, out, margin, notes)
        say(md.read_text(encoding="utf-8"))
        for line in notes:
            warn(f"[polymnesia] not paired: {line}; only paired documents are compared")
        say(f"[polymnesia] comparison: {md}, {page} and {len(csvs)} CSV tables in {md.parent}")
        return
    md, page = write_comparison([str(d) for d in dirs], out, chosen)
    say(md.read_text(encoding="utf-8"))
    say(f"[polymnesia] comparison: {md} and {page}")

"""Record run folders as a docs page's measured-run section (docs/runs/NAME.json + the block).

Usage::

    python scripts/measured_run.py NAME --config configs/x.yaml --doc docs/x.md \\
        --run RUN_DIR:SEED[:TIME_FILE] [--run ...] [--pooled RUN_DIR] [--commit SHA]
        [--table NAME] [--note TEXT]

Each ``--run`` is a run folder of the config, the training seed it ran with (``0,1,2`` for
one run that trains several seeds inside its pipeline, as ``lf_mlf`` does) and, optionally,
the ``/usr/bin/time -v`` report of the command that made it (wall time, peak RSS). The
``--pooled`` is a run of the same config with ``seeds: [..]`` listing those seeds (every
stage reused from theirs): its claims are recorded and shown beside the seeds'. The
record goes to ``docs/runs/NAME.json``; its rendering replaces the block between
``<!-- measured-run NAME -->`` and ``<!-- /measured-run NAME -->`` in ``--doc``. Without
``--commit`` the repository's HEAD is recorded: pass the commit the runs were made at.
``--render-only`` re-renders the block from the checked-in record. ``--band`` also writes
the seed-noise band of the config's content from the seeds' claims
(``src/polymnesia/experiments/seed_bands/``, read by every later one-seed report of a config
with the same content; docs/reports.md, "Seed noise").
"""

from __future__ import annotations

import argparse
import datetime
import subprocess
import sys
from pathlib import Path

from polymnesia.errors import PolymnesiaError
from polymnesia.experiments.loading import load_config
from polymnesia.experiments.seeds import band_from_record, write_band
from polymnesia.reports.measured import parse_gnu_time, read_record, record_runs, write_record
from polymnesia.reports.measured_block import render, replace_block

ROOT = Path(__file__).resolve().parent.parent


def _run_arg(text: str) -> tuple[Path, int | list[int], Path | None]:
    parts = text.split(":")
    seeds = parts[1].split(",") if len(parts) in (2, 3) else []
    if not seeds or not all(s.isdigit() for s in seeds):
        raise argparse.ArgumentTypeError(
            f"'{text}': give RUN_DIR:SEED or RUN_DIR:SEED:TIME_FILE (SEED a number, or "
            "S1,S2,.. for one run that trains several seeds inside it)"
        )
    seed: int | list[int] = int(seeds[0]) if len(seeds) == 1 else [int(s) for s in seeds]
    return Path(parts[0]), seed, Path(parts[2]) if len(parts) == 3 else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name")
    ap.add_argument("--doc", type=Path, required=True)
    ap.add_argument("--config")
    ap.add_argument("--run", type=_run_arg, action="append", default=[])
    ap.add_argument("--pooled", type=Path)
    ap.add_argument("--commit")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--machine")
    ap.add_argument("--table")
    ap.add_argument("--note", default="")
    ap.add_argument("--render-only", action="store_true")
    ap.add_argument(
        "--band",
        action="store_true",
        help="also write the seed-noise band of --config's content from the seeds' claims",
    )
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an override the runs were made with (for --band's config fingerprint)",
    )
    args = ap.parse_args(argv)
    path = ROOT / "docs" / "runs" / f"{args.name}.json"
    try:
        if args.render_only:
            record = read_record(path)
        else:
            if not args.run or not args.config:
                ap.error("give --config and at least one --run (or --render-only)")
            commit = (
                args.commit
                or subprocess.run(
                    ["git", "rev-parse", "HEAD"],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout.strip()
            )
            record = record_runs(
                args.name,
                args.config,
                [r[0] for r in args.run],
                seeds=[r[1] for r in args.run],
                commit=commit,
                date=args.date,
                times=[parse_gnu_time(r[2]) if r[2] else None for r in args.run],
                machine=args.machine,
                table=args.table,
                note=args.note,
                pooled=args.pooled,
            )
            write_record(path, record)
        doc = args.doc.read_text(encoding="utf-8")
        args.doc.write_text(replace_block(doc, args.name, render(record)), encoding="utf-8")
        if args.band:
            if not args.config:
                ap.error("--band needs --config (the config the runs ran)")
            band = write_band(band_from_record(record, load_config(args.config, args.set)))
            print(f"wrote the seed-noise band {band}")
    except PolymnesiaError as e:
        print(f"measured_run: error: {e}", file=sys.stderr)
        return 2
    print(f"wrote {path.relative_to(ROOT)} and the block in {args.doc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

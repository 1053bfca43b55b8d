"""The ``polymnesia`` command: thin subcommands that parse, build the config and call the library.

The library is imported inside the subcommands (a documented start-up cost: ``--help`` and
argument errors answer at once, without loading torch and transformers)."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

from polymnesia.cli import cache as cache_cli
from polymnesia.cli import env as env_cli
from polymnesia.cli import plan as plan_cli
from polymnesia.cli.argtypes import amount
from polymnesia.cli.output import PolymnesiaLogLines, plain_library_output, run_summary
from polymnesia.errors import ConfigWarning, PolymnesiaError


def _registries() -> dict[str, Any]:
    """Every registry, by category. Importing the protocols imports every layer below them,
    so every registry exists (and each loads its own entries on first use)."""
    import polymnesia.experiments  # noqa: F401  (start-up cost: imported when needed)
    from polymnesia.registry import all_registries

    return all_registries()


def _parse_options(items: list[str]) -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise PolymnesiaError(f"source option '{item}' must look like key=value")
        k, v = item.split("=", 1)
        out[k] = yaml.safe_load(v)
    return out


def build_specs(exp: Any, cfg: Any, source: str) -> list[Any]:
    """``exp.build(cfg)``, with a validation error raised while building turned into one line."""
    from pydantic import ValidationError

    from polymnesia.config.loader import format_validation_error
    from polymnesia.data.catalog import check_known_languages
    from polymnesia.errors import ConfigError

    try:
        specs = list(exp.build(cfg))
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, exp.Config, source)) from None
    for spec in specs:  # a language the source lacks: refused now, not at its data stage
        if spec.kind == "prepare_data":
            d = spec.params.data
            check_known_languages(d.source, d.options, spec.params.languages, f"config {source}")
    return specs


def _check_remote_code(cfg: Any, allowed: bool) -> None:
    """A config may ask for trust_remote_code; only ``--trust-remote-code`` grants it."""
    from polymnesia.trust import allow_remote_code

    def asked(node: Any, path: str) -> str | None:
        if isinstance(node, dict):
            for k, v in node.items():
                key = f"{path}.{k}" if path else str(k)
                if k == "trust_remote_code" and v is True:
                    return key
                if found := asked(v, key):
                    return found
        elif isinstance(node, list):
            for i, v in enumerate(node):
                if found := asked(v, f"{path}.{i}"):
                    return found
        return None

    key = asked(cfg.model_dump(mode="json"), "")
    if key and not allowed:
        raise PolymnesiaError(
            f"'{key}: true' asks to run code from a model, tokenizer or dataset repository; "
            "polymnesia runs such code only when the command line says so: add --trust-remote-code"
        )
    allow_remote_code(allowed)


def preflight(cfg: Any, device_type: str, source: str, specs: list[Any] | None = None) -> None:
    """What the config asks of this machine, checked before any stage runs (one line each):
    fp16 training needs an accelerator, an attention kernel what it runs on
    (:func:`~polymnesia.models.build.check_attention`), a tracker its package, and the
    lm-eval tasks of ``specs``' harness stages that are not polymnesia's must be in lm-eval's
    task index (a few seconds, so here rather than whenever a config is read; an unknown
    name would otherwise stop the run at its harness stage, after all its training)."""
    from polymnesia.config.base import submodels
    from polymnesia.models.build import check_attention
    from polymnesia.training.config import check_precision
    from polymnesia.training.trackers import check_trackers

    check_precision(cfg, device_type, f"config {source}")
    check_trackers(cfg, f"config {source}")
    for path, node in submodels(cfg):
        kernel = getattr(node, "attn_implementation", None)
        if isinstance(kernel, str):
            key = f"{path}.attn_implementation" if path else "attn_implementation"
            check_attention(kernel, device_type, f"config {source}: {key}")
    check_harness_names(specs or [])


def check_harness_names(specs: list[Any]) -> None:
    """The lm-eval tasks of ``specs``' harness stages that polymnesia does not ship must be in
    lm-eval's task index (read by ``run``'s preflight and by ``validate``)."""
    from polymnesia.harness.tasks import check_tasks, hub_offline, is_shipped

    tasks = sorted(
        {t for spec in specs if spec.kind == "evaluate_harness" for t in spec.params.tasks}
    )
    if any(not is_shipped(t) for t in tasks):
        check_tasks(tasks, hub_offline(), verify_online=True)


def cmd_run(args: argparse.Namespace) -> int:
    import yaml

    from polymnesia.cli.checks import check_run_dir_place, check_run_record, check_settings
    from polymnesia.experiments import EXPERIMENTS, load_config
    from polymnesia.io import file_lock
    from polymnesia.pipeline.run_dir import check_run_dir, default_run_dir, prepare_run_dir
    from polymnesia.pipeline.runner import (
        describe_plan,
        parse_roles,
        plan,
        run_pipeline,
        select_stages,
    )

    roles = parse_roles(args.only) if args.only else None
    cfg = load_config(args.config, args.overrides)
    exp = EXPERIMENTS.get(cfg.experiment)
    specs = build_specs(exp, cfg, args.config)
    n_all, skipped = len(specs), list[str]()
    if roles:
        complete = {p.spec.name for p in plan(specs) if p.status == "reuse"}
        specs, skipped = select_stages(specs, roles, complete)
    check_settings(cfg, specs, args.config)
    _check_remote_code(cfg, args.trust_remote_code)
    run_dir = Path(args.run_dir) if args.run_dir else default_run_dir(cfg)
    check_run_dir_place(run_dir)
    check_run_record(run_dir)
    if args.dry_run:
        check_run_dir(run_dir, cfg)  # what the run would refuse, the dry run refuses too
        print(
            yaml.safe_dump(
                cfg.model_dump(mode="json"), sort_keys=False, allow_unicode=True
            ).rstrip()
        )
        print(
            f"\n# run folder: {run_dir}\n# stages (reuse = cached, resume = interrupted, run = new):"
        )
        print(describe_plan(plan(specs)))
        if skipped:
            print(f"# skipped by --only (they need stages of other roles): {', '.join(skipped)}")
        return 0
    from polymnesia.runtime import partial_state

    state = partial_state()
    if roles is None or set(roles) - {"data"}:  # `--only data` runs no model: any machine
        preflight(cfg, state.device.type, args.config, specs)
    if state.is_main_process:
        prepare_run_dir(run_dir, cfg, extra={"trust_remote_code": bool(args.trust_remote_code)})
        if args.trust_remote_code:
            print("[polymnesia] trust_remote_code is ON for this run (recorded in run.json)")
        lock = file_lock(run_dir / ".lock", f"run folder {run_dir}")
        lock.__enter__()
    state.wait_for_everyone()
    started = time.monotonic()
    try:
        run_pipeline(
            specs,
            run_dir,
            log=lambda m: print(m, flush=True),
            lock_timeout=args.lock_timeout,
        )
        if state.is_main_process and roles:
            if skipped:
                print(
                    f"[polymnesia] skipped {len(skipped)} {'/'.join(roles)} stage(s) that need "
                    f"stages of other roles first: {', '.join(skipped)}"
                )
            print(
                f"[polymnesia] ran the {', '.join(roles)} stages and what they need "
                f"({len(specs)} of {n_all}); no report: `polymnesia run` with the same config "
                "runs the rest (reusing these) and writes it"
            )
        elif state.is_main_process:
            report = exp.report(cfg, run_dir)
            print(f"[polymnesia] {run_summary(run_dir, time.monotonic() - started)}")
            print(f"[polymnesia] report: {report}")
    finally:
        if state.is_main_process:
            lock.__exit__(None, None, None)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from polymnesia.cli.checks import check_settings
    from polymnesia.experiments import EXPERIMENTS, load_config
    from polymnesia.pipeline.runner import plan

    for path in args.configs:
        cfg = load_config(path, args.set or [])
        specs = build_specs(EXPERIMENTS.get(cfg.experiment), cfg, path)
        check_settings(cfg, specs, path)
        check_harness_names(specs)
        plan(specs)
        print(f"ok  {path}  ({cfg.experiment}, {len(specs)} stages)")
    return 0


def cmd_ls(args: argparse.Namespace) -> int:
    from polymnesia.errors import unknown

    registries = _registries()
    categories = [args.what] if args.what else list(registries)
    for cat in categories:
        if cat not in registries:
            raise unknown("category", cat, registries)
        reg = registries[cat]
        print(f"{cat}:")
        for entry in reg:
            print(f"  {entry.name:22s} {entry.description}")
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    from polymnesia.data.catalog import describe_source, fetch_source

    options = _parse_options(args.options)
    if args.action == "fetch":
        print(fetch_source(args.source, **options))
    elif args.json:
        print(json.dumps(describe_source(args.source, **options), indent=2, ensure_ascii=False))
    else:
        print(format_source_info(describe_source(args.source, **options)))
    return 0


def format_source_info(info: dict[str, Any]) -> str:
    """A readable summary of ``describe_source``: one row per language."""
    from polymnesia.data.languages import get_language

    lines = [f"source: {info.get('name')}", f"licence: {info.get('licence', '')}"]
    if "fractions" in info:
        lines.append(
            f"splits: train/validation/test = {info['fractions']} by aligned id (seed {info.get('seed')})"
        )
    lines.append(
        f"{'lang':6s}{'language':22s}{'script':12s}{'records':>9s}{'train':>8s}{'valid':>8s}{'test':>8s}"
    )
    for lang, row in info.get("per_language", {}).items():
        try:
            meta = get_language(lang)
            name, script = meta.name, meta.script
        except PolymnesiaError:
            name, script = "?", "?"
        sp = row.get("splits", {})
        lines.append(
            f"{lang:6s}{name[:21]:22s}{script[:11]:12s}{row.get('records', 0):9d}"
            f"{sp.get('train', 0):8d}{sp.get('validation', 0):8d}{sp.get('test', 0):8d}"
        )
    return "\n".join(lines)


def cmd_report(args: argparse.Namespace) -> int:
    from polymnesia.experiments.reporting import rebuild_report

    print(rebuild_report(Path(args.run_dir)))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from polymnesia.cli.checks import check_run_record
    from polymnesia.reports.compare import write_comparison

    for run_dir in map(Path, args.run_dirs):
        if run_dir.is_dir():
            check_run_record(run_dir, "leave it out, or run its config again into a new folder")
    tables = [t for t in args.tables.split(",") if t] if args.tables else None
    if args.out is not None:
        out = Path(args.out)
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
    md, page = write_comparison(args.run_dirs, args.out, tables)
    print(md.read_text(encoding="utf-8"))
    print(f"[polymnesia] comparison: {md} and {page}")
    return 0


def _default_lock_timeout() -> float:
    try:
        return float(os.environ.get("POLYMNESIA_LOCK_TIMEOUT", 86400))
    except ValueError:
        return 86400.0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="polymnesia", description="Multilingual continual learning of language models."
    )
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run an experiment config")
    r.add_argument("config")
    r.add_argument("overrides", nargs="*", help="key.path=value overrides")
    r.add_argument("--run-dir", help="run folder (default runs/NAME-CONFIGHASH)")
    r.add_argument(
        "--dry-run",
        action="store_true",
        help="print the resolved config and the stage plan, run nothing",
    )
    r.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="allow models, tokenizers and datasets to run code from their repositories (this run only)",
    )
    r.add_argument(
        "--lock-timeout",
        type=amount("seconds"),
        default=_default_lock_timeout(),
        metavar="SECONDS",
        help="how long to wait for a cache entry another run is building "
        "(default $POLYMNESIA_LOCK_TIMEOUT or 86400)",
    )
    r.add_argument(
        "--only",
        metavar="ROLES",
        help="run only the stages of these roles (comma-separated: data, training, evaluation, "
        "analysis, other) and the stages they need, and write no report; e.g. --only data on "
        "a machine with internet, then `polymnesia cache export` for one without",
    )
    r.set_defaults(fn=cmd_run)
    v = sub.add_parser("validate", help="check configs without running anything")
    v.add_argument("configs", nargs="+")
    v.add_argument("--set", action="append", help="key.path=value override applied to every config")
    v.set_defaults(fn=cmd_validate)
    ls = sub.add_parser("ls", help="list what is registered")
    ls.add_argument(
        "what",
        nargs="?",
        help="experiments, stages, sources, languages, metrics, presets, combiners, plugins, "
        "methods, tasks, inits",
    )
    ls.set_defaults(fn=cmd_ls)
    d = sub.add_parser("data", help="fetch a corpus into the cache or describe it")
    d.add_argument("action", choices=["fetch", "info"])
    d.add_argument("source")
    d.add_argument("options", nargs="*", help="source options as key=value")
    d.add_argument("--json", action="store_true", help="print info as JSON")
    d.set_defaults(fn=cmd_data)
    rep = sub.add_parser("report", help="rebuild the report of a run folder from its saved results")
    rep.add_argument("run_dir")
    rep.set_defaults(fn=cmd_report)
    cmp = sub.add_parser(
        "compare", help="put the headline tables of runs of one protocol side by side, with CIs"
    )
    cmp.add_argument("run_dirs", nargs="+", metavar="RUN_DIR")
    cmp.add_argument(
        "--out", help="folder for compare.md and compare.html (default runs/compare-HASH)"
    )
    cmp.add_argument("--tables", help="comma-separated table names (default: every shared table)")
    cmp.set_defaults(fn=cmd_compare)
    cache_cli.add_parser(sub)
    env_cli.add_parser(sub)
    plan_cli.add_parser(sub, build_specs)
    return p


def _one_line_config_warnings(show: Any) -> Any:
    """``show`` (a ``warnings.showwarning``) with polymnesia's config warnings on one line."""

    def shown(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
        if issubclass(category, ConfigWarning):
            print(f"polymnesia: warning: {message}", file=sys.stderr)
        else:
            show(message, category, *args, **kwargs)

    return shown


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


def main(argv: list[str] | None = None) -> int:
    from polymnesia.runtime import shutdown

    args = parse_args(build_parser(), argv)
    plain_library_output()
    log_lines = PolymnesiaLogLines(logging.WARNING)
    logging.getLogger("polymnesia").addHandler(log_lines)
    previous = warnings.showwarning
    warnings.showwarning = _one_line_config_warnings(previous)
    try:
        return int(args.fn(args))
    except PolymnesiaError as e:
        print(f"polymnesia: error: {disk_full(e) or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("polymnesia: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except Exception as e:
        full = disk_full(e)
        if full is None:
            raise
        print(f"polymnesia: error: {full}", file=sys.stderr)
        return 2
    finally:
        warnings.showwarning = previous
        logging.getLogger("polymnesia").removeHandler(log_lines)
        shutdown()


if __name__ == "__main__":
    sys.exit(main())

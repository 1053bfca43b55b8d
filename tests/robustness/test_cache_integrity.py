"""Stage cache integrity: damaged entries are reported in one line and rebuilt, never reused."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from robustness_helpers import flip_byte, tiny_specs

from polymnesia.cli.main import main
from polymnesia.errors import PolymnesiaError
from polymnesia.io import file_lock
from polymnesia.pipeline import integrity
from polymnesia.pipeline.runner import plan, run_pipeline
from polymnesia.pipeline.stage import STAGES


def _run(log: list[str], run_dir: Path | None = None, **kw) -> dict[str, Path]:  # type: ignore[no-untyped-def]
    return run_pipeline(tiny_specs(), run_dir, log=log.append, **kw)


def _truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _append(p: Path) -> None:
    with open(p, "a", encoding="utf-8") as f:
        f.write(" ")


#: (stage, file in its entry, damage) -> the entry must be rebuilt, saying why in one line
DAMAGE: list[tuple[str, str, Callable[[Path], None], str]] = [
    ("tokenizer", "tokenizer/tokenizer.json", lambda p: flip_byte(p, keep_mtime=False), "sha256"),
    ("tokenizer", "tokenizer/tokenizer.json", _append, "size"),
    ("data", "en/train.jsonl", _truncate, "size"),
    ("data", "fr/test.jsonl", lambda p: p.unlink(), "missing"),
    ("data", "manifest.json", lambda p: p.write_text("{}"), "size"),
    ("tokenizer", "_complete.json", lambda p: p.write_text("{torn"), "unreadable"),
]


@pytest.mark.parametrize(("stage", "rel", "damage", "why"), DAMAGE)
def test_damaged_entry_is_reported_and_rebuilt(isolated_cache, stage, rel, damage, why):  # type: ignore[no-untyped-def]
    log: list[str] = []
    entries = _run(log)
    target = entries[stage] / rel
    good = target.read_bytes() if rel != "_complete.json" else None
    damage(target)
    [p] = [p for p in plan(tiny_specs()) if p.spec.name == stage]
    assert p.status == "run" and why in p.note
    log.clear()
    entries = _run(log)
    said = [line for line in log if " is damaged" in line]
    assert len(said) == 1 and stage in said[0] and why in said[0], log
    assert integrity.check_entry(entries[stage], full=True).state == "ok"
    if good is not None:
        assert target.read_bytes() == good  # rebuilt to the same content (deterministic stage)


def test_touched_files_are_hashed_not_rebuilt(isolated_cache):  # type: ignore[no-untyped-def]
    log: list[str] = []
    entry = _run(log)["tokenizer"]
    target = entry / "tokenizer" / "tokenizer.json"
    os.utime(target, ns=(0, target.stat().st_mtime_ns + 10**9))  # a copied cache: mtime moves
    assert [p.status for p in plan(tiny_specs())] == ["reuse", "reuse"]
    log.clear()
    _run(log)
    assert not [line for line in log if " is damaged" in line]
    files = json.loads((entry / "_complete.json").read_text())["files"]
    assert files["tokenizer/tokenizer.json"]["mtime_ns"] == target.stat().st_mtime_ns


def test_same_size_same_mtime_change_is_caught_by_cache_verify(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    entry = _run([])["tokenizer"]
    flip_byte(entry / "tokenizer" / "tokenizer.json", keep_mtime=True)
    # the fast path (size + mtime) cannot see it; the full check can
    assert integrity.check_entry(entry).state == "ok"
    capsys.readouterr()
    assert main(["cache", "verify"]) == 1
    out = capsys.readouterr().out
    assert "DAMAGED" in out and "tokenizer/tokenizer.json: sha256" in out
    assert main(["cache", "prune", "--full", "--dry-run"]) == 0
    assert str(entry) in capsys.readouterr().out and entry.exists()
    assert main(["cache", "prune", "--full"]) == 0
    assert not entry.exists()
    assert main(["cache", "verify"]) == 0


def test_entry_without_manifest_is_adopted(isolated_cache):  # type: ignore[no-untyped-def]
    entry = _run([])["data"]
    marker = entry / "_complete.json"
    old = {k: v for k, v in json.loads(marker.read_text()).items() if k != "files"}
    marker.write_text(json.dumps(old))  # as written by polymnesia before manifests
    assert integrity.check_entry(entry).state == "unverified"
    log: list[str] = []
    _run(log)
    assert any("without a manifest" in line and "hashed now" in line for line in log)
    assert integrity.check_entry(entry, full=True).state == "ok"


def test_cache_ls_shows_sizes_ages_and_runs(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    from polymnesia.pipeline.run_dir import prepare_run_dir

    class Cfg:  # the two fields prepare_run_dir records, plus a dump for the hash
        experiment, name = "language_modeling", "tiny"

        def model_dump(self, mode: str = "json") -> dict[str, str]:
            return {"experiment": self.experiment, "name": self.name}

    run = tmp_path / "runs" / "tiny"
    prepare_run_dir(run, Cfg())
    _run([], run)
    capsys.readouterr()
    assert main(["cache", "ls"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(("prepare_data/", "train_tok"))]
    assert len(rows) == 2 and all(str(run.resolve()) in r and " ok " in r for r in rows), out
    assert "2 entries" in out


def test_second_run_waits_for_the_entry_then_reuses_it(isolated_cache):  # type: ignore[no-untyped-def]
    [data, tok] = plan(tiny_specs())
    _run([])  # build both entries, then pretend another process is still building the tokenizer
    lock_path = tok.entry.with_suffix(".lock")
    marker = tok.entry / "_complete.json"
    saved = marker.read_bytes()
    marker.unlink()
    holding, released = threading.Event(), threading.Event()

    def other_process() -> None:  # flock locks conflict between open files, threads included
        with file_lock(lock_path, "entry"):
            holding.set()
            time.sleep(1.0)
            marker.write_bytes(saved)  # the other run completes the entry
        released.set()

    holder = threading.Thread(target=other_process)
    holder.start()
    assert holding.wait(10)
    log: list[str] = []
    _run(log, lock_timeout=30)
    holder.join()
    assert released.is_set()
    assert any("waiting for another polymnesia process" in line for line in log), log
    assert any("built by another run" in line for line in log), log


def test_waiting_times_out_in_one_line(isolated_cache):  # type: ignore[no-untyped-def]
    [_, tok] = plan(tiny_specs())
    _run([])
    (tok.entry / "_complete.json").unlink()
    with (
        file_lock(tok.entry.with_suffix(".lock"), "entry"),
        pytest.raises(PolymnesiaError, match=r"still in use .* after 0.5 s"),
    ):
        _run([], lock_timeout=0.5)


def test_cache_verify_refuses_folders_that_are_not_entries(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    run = tmp_path / "runs" / "A"
    run.mkdir(parents=True)
    (run / "run.json").write_text('{"stages": {}}')
    entries = _run([], run)
    kind = entries["data"].parent
    capsys.readouterr()

    def refused(name: str) -> str:
        assert main(["cache", "verify", name]) == 2
        out, err = capsys.readouterr()
        assert len(err.splitlines()) == 1 and "Traceback" not in err and not out, (out, err)
        assert err.startswith("polymnesia: error: cache verify: ")
        return err.strip()

    assert f"{run} is a run folder, not a cache entry" in refused(str(run))
    said = refused(kind.name)  # KIND alone: the folder of all its entries
    assert f"{kind.name} holds all {kind.name} entries, it is not one" in said
    assert f"e.g. {kind.name}/{entries['data'].name}" in said
    stages = isolated_cache / "stages"
    for name in ("/", str(tmp_path), str(isolated_cache), str(stages), str(tmp_path / "runs")):
        said = refused(name)
        assert f"{name} is not a cache entry (an entry is a folder under {stages}/<kind>/" in said
    assert main(["cache", "verify", str(entries["data"])]) == 0
    assert capsys.readouterr().out.strip() == "1 entries checked, 0 damaged"


def test_cache_verify_still_reports_an_interrupted_entry(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    entry = _run([])["tokenizer"]
    (entry / "_complete.json").unlink()  # as if interrupted: only spec.json and some files
    copy = tmp_path / "elsewhere" / entry.name  # an entry outside the cache: its spec.json says
    copy.mkdir(parents=True)
    (copy / "spec.json").write_bytes((entry / "spec.json").read_bytes())
    capsys.readouterr()
    for name in (str(entry), f"{entry.parent.name}/{entry.name}", str(copy)):
        assert main(["cache", "verify", name]) == 0
        out = capsys.readouterr().out
        assert "partial " in out and "interrupted" in out and "1 entries checked" in out, out


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "week"])
def test_prune_older_than_is_a_finite_number_of_days(value, capsys) -> None:  # type: ignore[no-untyped-def]
    from polymnesia.cli.main import main

    with pytest.raises(SystemExit) as e:
        main(["cache", "prune", f"--older-than={value}", "--dry-run"])
    assert e.value.code == 2
    assert "argument --older-than:" in capsys.readouterr().err


def test_cache_verify_run_checks_the_entries_a_run_folder_uses(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    import shutil

    run = tmp_path / "runs" / "A"
    run.mkdir(parents=True)
    (run / "run.json").write_text('{"stages": {}}')
    entries = _run([], run)
    capsys.readouterr()
    assert main(["cache", "verify", "--run", str(run)]) == 0
    assert (
        capsys.readouterr().out.strip() == f"{len(entries)} entries checked, 0 damaged, 0 missing"
    )
    roles = {s.name: STAGES.get(s.kind).category for s in tiny_specs()}
    assert set(roles.values()) == {"data"}
    assert main(["cache", "verify", "--run", str(run), "--only", "evaluation"]) == 0
    assert capsys.readouterr().out.strip() == "0 entries checked, 0 damaged, 0 missing"
    flip_byte(entries["tokenizer"] / "tokenizer" / "tokenizer.json", keep_mtime=True)
    shutil.rmtree(entries["data"])
    assert main(["cache", "verify", "--run", str(run)]) == 1
    out = capsys.readouterr().out
    assert f"MISSING     stage data's cache entry {entries['data']} is gone" in out
    assert f"DAMAGED     {entries['tokenizer']}: " in out
    assert out.strip().endswith(f"{len(entries) - 1} entries checked, 1 damaged, 1 missing")
    assert main(["cache", "verify", "--run", str(tmp_path)]) == 2  # no run.json: one line
    err = capsys.readouterr().err
    assert err.strip() == f"polymnesia: error: --run: {tmp_path}/run.json is missing or damaged"

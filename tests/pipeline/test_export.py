"""The checks before ``polymnesia export`` and its verified copy, on a hand-made run folder:
each refusal is one line naming what is wrong and what is accepted."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from polymnesia.errors import PolymnesiaError
from polymnesia.pipeline.export import check_export, check_push, copy_model, recorded_stages
from polymnesia.pipeline.integrity import check_entry, write_marker


def entry(root: Path, kind: str, files: dict[str, str]) -> Path:
    folder = root / "cache" / kind / ("0" * 24)
    for rel, text in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    write_marker(folder, {"seconds": 1.0})
    return folder


@pytest.fixture
def run(tmp_path: Path) -> Path:
    model = {"model/config.json": '{"architectures": ["MistralForCausalLM"]}', "model/w": "abc"}
    stages = {
        "pretrain": ("pretrain", entry(tmp_path / "a", "pretrain", model)),
        "evaluate": ("evaluate_lm", entry(tmp_path / "b", "evaluate_lm", {"scores.jsonl": ""})),
    }
    run = tmp_path / "run"
    run.mkdir()
    record = {
        "stages": {
            name: {"kind": kind, "fingerprint": "f" * 64, "entry": str(path), "status": "run"}
            for name, (kind, path) in stages.items()
        }
    }
    (run / "run.json").write_text(json.dumps(record))
    return run


def one_line(error: pytest.ExceptionInfo[PolymnesiaError]) -> str:
    text = str(error.value)
    assert "\n" not in text
    return text


def test_an_unknown_stage_lists_the_stages_with_a_model(run: Path, tmp_path: Path) -> None:
    with pytest.raises(PolymnesiaError) as e:
        check_export(run, "pretrian", tmp_path / "out")
    assert one_line(e).endswith("has no finished stage 'pretrian'; stages with a model: pretrain")


def test_a_stage_that_holds_no_model_is_refused(run: Path, tmp_path: Path) -> None:
    with pytest.raises(PolymnesiaError) as e:
        check_export(run, "evaluate", tmp_path / "out")
    assert one_line(e) == (
        "stage 'evaluate' (evaluate_lm) holds no model (its entry has no model/ or adapter/ "
        "folder); stages with a model: pretrain"
    )


def test_a_run_without_a_model_stage_says_so(run: Path, tmp_path: Path) -> None:
    record = json.loads((run / "run.json").read_text())
    del record["stages"]["pretrain"]
    (run / "run.json").write_text(json.dumps(record))
    with pytest.raises(PolymnesiaError) as e:
        check_export(run, "evaluate", tmp_path / "out")
    assert one_line(e).endswith(
        "holds no model (its entry has no model/ or adapter/ folder); this run has no stage "
        "with a model yet"
    )


def test_a_destination_that_is_not_empty_or_a_file_is_refused(run: Path, tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(PolymnesiaError) as e:
        check_export(run, "pretrain", tmp_path / "full")
    assert one_line(e) == f"{tmp_path / 'full'} exists and is not empty; name a new or empty folder"
    (tmp_path / "file").write_text("x")
    with pytest.raises(PolymnesiaError, match="exists and is not a folder"):
        check_export(run, "pretrain", tmp_path / "file")
    (tmp_path / "empty").mkdir()
    assert check_export(run, "pretrain", tmp_path / "empty").name == "pretrain"


def test_not_a_run_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PolymnesiaError) as e:
        check_export(tmp_path, "pretrain", tmp_path / "out")
    assert one_line(e) == f"{tmp_path} is not a polymnesia run folder (no run.json)"


def test_a_damaged_entry_is_refused_before_the_copy(run: Path, tmp_path: Path) -> None:
    model = recorded_stages(run)["pretrain"].model
    (model / "w").write_text("abcd")
    with pytest.raises(PolymnesiaError) as e:
        check_export(run, "pretrain", tmp_path / "out")
    assert "is damaged (model/w: size 4 bytes, expected 3)" in one_line(e)


def test_the_copy_holds_the_model_and_card_and_leaves_the_entry_alone(
    run: Path, tmp_path: Path
) -> None:
    stage = check_export(run, "pretrain", tmp_path / "empty")
    (tmp_path / "empty").mkdir()
    files = copy_model(stage, tmp_path / "empty", "---\nlicense: other\n---\n")
    assert files == ["config.json", "w", "README.md"]
    assert (tmp_path / "empty" / "README.md").read_text().startswith("---\nlicense: other")
    assert (tmp_path / "empty" / "w").read_text() == "abc"
    assert not (stage.model / "README.md").exists()
    assert check_entry(stage.entry, full=True).state == "ok"


def test_a_file_that_differs_from_the_manifest_is_not_exported(run: Path, tmp_path: Path) -> None:
    """Same size and mtime (the cheap check passes): the copy's sha256 still catches it."""
    stage = check_export(run, "pretrain", tmp_path / "out")
    weights = stage.model / "w"
    st = weights.stat()
    weights.write_text("abd")
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))
    with pytest.raises(PolymnesiaError, match="differs from the entry's manifest"):
        copy_model(stage, tmp_path / "out", "card")
    assert not (tmp_path / "out").exists()


def test_push_is_refused_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PolymnesiaError) as e:
        check_push("someone/tiny")
    assert one_line(e).startswith("--push-to-hub needs the Hugging Face Hub, and HF_HUB_OFFLINE")


def test_push_is_refused_when_the_hub_does_not_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    monkeypatch.setattr(constants, "ENDPOINT", "http://127.0.0.1:9")  # discard: nothing listens
    with pytest.raises(PolymnesiaError) as e:
        check_push("someone/tiny")
    assert one_line(e).startswith("--push-to-hub: the Hugging Face Hub cannot be reached")


def test_push_to_a_malformed_repository_id_is_refused() -> None:
    with pytest.raises(PolymnesiaError) as e:
        check_push("a/b/c")
    assert one_line(e).startswith("--push-to-hub 'a/b/c' is not a Hub repository id")

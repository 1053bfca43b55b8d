"""Issue 30, items 6 and 7 (the config layer's part is in test_config_bounds.py): input that
used to end in a traceback ends in one line, and what a run refused late is refused by
``validate`` and ``run --dry-run``."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
import yaml
from cli_helpers import SMALL, config_with, refused
from cli_helpers import TINY_RUN as TINY

from polymnesia.cli.main import main
from polymnesia.errors import DataError

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
QUICK = str(CONFIGS / "quickstart.yaml")
TWO_PHASE = CONFIGS / "two_phase_smoke.yaml"


# -- 6: one line instead of a traceback ------------------------------------------------------


def test_too_few_tokens_for_one_block_is_a_data_error():  # type: ignore[no-untyped-def]
    from polymnesia.training.data import pack_documents

    with pytest.raises(DataError, match="not enough for one block of block_size 8"):
        pack_documents([[1, 2], [3]], block_size=8, eos_id=0)


def test_block_size_larger_than_the_data_is_one_line(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    argv = ["run", QUICK, *TINY, "train.block_size=100000", "--run-dir", str(tmp_path / "r")]
    assert "not enough for one block" in refused(capsys, argv)


def test_local_corpus_too_small_for_one_block_is_one_line(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for lang in ("en", "fr"):
        (corpus / f"{lang}.txt").write_text("a b\nc d\ne f\ng h\ni j\n", encoding="utf-8")
    argv = [
        "run",
        QUICK,
        *TINY,
        "data.source=local",
        f"data.options.path={corpus}",
        "data.max_eval_per_lang=null",
        "data.max_train_per_lang=null",
        "--run-dir",
        str(tmp_path / "r"),
    ]
    assert "not enough for one block" in refused(capsys, argv)


@pytest.mark.parametrize("content", [b"[]", b"null", b"\xff\xfe{}"])
@pytest.mark.parametrize("dry_run", [True, False])
def test_damaged_run_json_is_one_line(isolated_cache, tmp_path, capsys, content, dry_run):  # type: ignore[no-untyped-def]
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "run.json").write_bytes(content)
    argv = ["run", QUICK, *SMALL, "--run-dir", str(run_dir), *(["--dry-run"] if dry_run else [])]
    assert "damaged run.json" in refused(capsys, argv)


@pytest.mark.parametrize("content", [b"[]", b"null", b"\xff\xfe{}"])
def test_compare_of_a_damaged_run_json_is_one_line(isolated_cache, tmp_path, capsys, content):  # type: ignore[no-untyped-def]
    folders = []
    for name, record in (("bad", content), ("good", b'{"stages": {}}')):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.yaml").write_bytes(Path(QUICK).read_bytes())
        (folder / "run.json").write_bytes(record)
        folders.append(str(folder))
    err = refused(capsys, ["compare", *folders, "--out", str(tmp_path / "out")])
    assert "bad has a damaged run.json" in err and "leave it out" in err


def test_full_disk_in_a_stage_is_one_line(isolated_cache, tmp_path, capsys, monkeypatch):  # type: ignore[no-untyped-def]
    import polymnesia.stages.data as data_stage

    def full(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(data_stage, "write_jsonl_atomic", full)
    err = refused(capsys, ["run", QUICK, *TINY, "--run-dir", str(tmp_path / "r")])
    assert "the disk is full" in err and "run the same command again" in err


def test_full_disk_while_preparing_the_run_folder_is_one_line(
    isolated_cache, tmp_path, capsys, monkeypatch
):  # type: ignore[no-untyped-def]
    import polymnesia.pipeline.run_dir as rd

    def full(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(rd, "atomic_write_yaml", full)
    err = refused(capsys, ["run", QUICK, *SMALL, "--run-dir", str(tmp_path / "r")])
    assert "cannot use run folder" in err and "the disk is full: free space" in err
    assert "pass a writable --run-dir" not in err  # not the advice for a read-only folder


def test_full_disk_wrapped_by_a_library_is_recognised():  # type: ignore[no-untyped-def]
    from polymnesia.cli.main import disk_full

    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/x/model.safetensors")
        except OSError as e:
            raise RuntimeError("saving failed") from e
    except RuntimeError as wrapped:
        assert "writing /x/model.safetensors" in (disk_full(wrapped) or "")
    assert "writing" not in (disk_full(OSError(errno.ENOSPC, "No space left", 3)) or "writing")
    assert disk_full(RuntimeError("[enforce fail] file write failed: No space left on device"))
    assert disk_full(ValueError("something else")) is None


def test_cache_import_over_a_file_is_one_line(isolated_cache, tmp_path, capsys, monkeypatch):  # type: ignore[no-untyped-def]
    from robustness_helpers import tiny_specs

    from polymnesia.pipeline.runner import run_pipeline
    from polymnesia.pipeline.transfer import export_entries

    entries = run_pipeline(tiny_specs(), None, log=lambda _: None)
    archive = tmp_path / "entries.tar.gz"
    export_entries(list(entries.values()), archive)
    other = tmp_path / "other"
    monkeypatch.setenv("POLYMNESIA_CACHE", str(other))
    data = entries["data"]
    blocker = other / "stages" / data.parent.name / data.name
    blocker.parent.mkdir(parents=True)
    blocker.write_text("not an entry")
    err = refused(capsys, ["cache", "import", str(archive)])
    assert "cache import" in err


# -- 7: refused by validate and --dry-run, not late ----------------------------------------


@pytest.mark.parametrize("root", ["/proc", "/sys", "/dev"])
def test_run_dir_under_a_kernel_file_system_is_refused_by_dry_run(isolated_cache, capsys, root):  # type: ignore[no-untyped-def]
    argv = ["run", QUICK, *SMALL, "--dry-run", "--run-dir", f"{root}/polymnesia-run"]
    assert f"under {root}" in refused(capsys, argv)


def test_lora_rank_above_the_model_width_isrefused(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    err = refused(capsys, ["validate", str(TWO_PHASE), "--set", "mitigation.lora_rank=100000"])
    assert "mitigation.lora_rank" in err and "larger than the width" in err
    af = str(CONFIGS / "active_forgetting_smoke.yaml")
    err = refused(capsys, ["validate", af, "--set", "instruct.lora_rank=100000"])
    assert "instruct.lora_rank" in err


def test_token_task_on_label_only_data_isrefused(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    lf = str(CONFIGS / "lf_mlf_smoke.yaml")
    err = refused(capsys, ["validate", lf, "--set", "task.kind=token"])
    assert "task.kind is 'token'" in err and "genre_segments" in err
    assert (
        main(
            ["validate", lf, "--set", "task.kind=token", "--set", "task.constructed=genre_segments"]
        )
        == 0
    )


def test_unknown_instruct_fields_arerefused(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    af = str(CONFIGS / "active_forgetting_smoke.yaml")
    err = refused(capsys, ["validate", af, "--set", "instruct.fields={instrucion: q}"])
    assert "instruct.fields: unknown role 'instrucion'" in err
    assert main(["validate", af, "--set", "instruct.fields={instruction: q}"]) == 0


def test_freezing_pattern_matching_no_weight_isrefused(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    data = yaml.safe_load(TWO_PHASE.read_text(encoding="utf-8"))
    data["mitigation"]["freezing"][1]["pattern"] = r"attention\.query"
    path = config_with(tmp_path, TWO_PHASE, **data)
    err = refused(capsys, ["validate", path])
    assert "mitigation.freezing.1.pattern" in err and "matches no weight matrix" in err
    assert "matches no weight matrix" in refused(capsys, ["run", path, "--dry-run"])


def test_freezing_pattern_is_checked_against_a_local_model_folder(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    from polymnesia.testing import save_tiny, tiny_bpe

    folder = save_tiny(tmp_path / "model", "gpt2", tiny_bpe(vocab_size=300))
    data = yaml.safe_load(TWO_PHASE.read_text(encoding="utf-8"))
    data["instruct_model"] = str(folder)
    data["pairs"][data["mitigation"]["pair"]]["phase1"] = "instruct"  # the mitigated pair
    data["mitigation"]["lora_rank"] = None
    data["mitigation"]["freezing"][1]["pattern"] = r"self_attn\.q_proj"  # a Llama name
    err = refused(capsys, ["validate", config_with(tmp_path, TWO_PHASE, **data)])
    assert "matches no weight matrix" in err and str(folder) in err
    data["mitigation"]["freezing"][1]["pattern"] = r"attn\.c_attn"  # GPT-2's
    assert main(["validate", config_with(tmp_path, TWO_PHASE, **data)]) == 0


def test_lm_eval_task_in_a_language_the_data_lacks_isrefused(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    err = refused(
        capsys,
        ["validate", str(TWO_PHASE), "--set", "evaluate.harness.multilingual=[poly_genre_es]"],
    )
    assert "poly_genre_es" in err and "'es'" in err


def test_shipped_configs_pass_the_new_checks(isolated_cache, capsys):  # type: ignore[no-untyped-def]
    offline = {"two_phase_paper.yaml"}  # names Hub tasks: refused offline in one line
    names = [p for p in sorted(CONFIGS.glob("*.yaml")) if p.name not in offline]
    assert main(["validate", *map(str, names)]) == 0, capsys.readouterr().err


def test_run_record_check_reads_only_json_objects(tmp_path):  # type: ignore[no-untyped-def]
    from polymnesia.experiments.preflight import check_run_record

    (tmp_path / "run.json").write_text(json.dumps({"stages": {}}))
    check_run_record(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"stages": []}))
    with pytest.raises(Exception, match="'stages' is not a JSON object"):
        check_run_record(tmp_path)


@pytest.mark.parametrize("text", ["", "   "])
def test_jsonl_record_with_empty_text_is_refused_when_read(tmp_path, text):  # type: ignore[no-untyped-def]
    from polymnesia.data.sources import get_source

    path = tmp_path / "d.jsonl"
    rows = [{"lang": "en", "text": "a verse"}, {"lang": "en", "text": text}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with pytest.raises(DataError, match=rf"{path} line 2: field 'text' is empty"):
        get_source("local", path=str(path)).languages()


def test_lora_rank_is_checked_against_a_local_model_folder(isolated_cache, tmp_path, capsys):  # type: ignore[no-untyped-def]
    from polymnesia.testing import save_tiny, tiny_bpe

    folder = save_tiny(tmp_path / "model", "llama", tiny_bpe(vocab_size=300), hidden_size=32)
    smoke = CONFIGS / "lifelong_smoke.yaml"
    data = yaml.safe_load(smoke.read_text(encoding="utf-8"))
    data["base"]["model"] = {"name_or_path": str(folder)}
    data["ranks"] = [64]
    err = refused(capsys, ["validate", config_with(tmp_path, smoke, **data)])
    assert "ranks.0: LoRA rank 64 is larger than the width" in err
    data["ranks"] = [4]
    assert main(["validate", config_with(tmp_path, smoke, **data)]) == 0, capsys.readouterr()


def test_a_translation_task_needs_english_in_the_data_too() -> None:
    from types import SimpleNamespace

    from polymnesia.errors import ConfigError
    from polymnesia.experiments.preflight import _check_harness_languages

    def specs(languages: list[str]) -> list[SimpleNamespace]:
        data = SimpleNamespace(
            name="data", kind="data", inputs={}, params=SimpleNamespace(languages=languages)
        )
        harness = SimpleNamespace(
            name="h",
            kind="evaluate_harness",
            inputs={"data": "data"},
            params=SimpleNamespace(tasks=["poly_translate_de"]),
        )
        return [data, harness]

    _check_harness_languages(specs(["de", "en"]))
    with pytest.raises(ConfigError, match="poly_translate_de reads language 'en'"):
        _check_harness_languages(specs(["de"]))

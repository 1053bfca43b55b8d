"""Local model folders are read before anything loads them, and a loaded model keeps its own
tokenizer (issue 45 items 2 and 5).

Each case builds a tiny model folder with transformers and safetensors (``polymnesia.testing``),
damages it by hand, and points the quickstart's ``model.name_or_path`` at it, as a user would:
``validate`` and ``run --dry-run`` refuse it in one line, where the run stopped at its pretrain
stage with a traceback (or trained the wrong pairing silently).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from cli_helpers import refused
from fuzz_model_folders import (
    MARKER_CODE,
    edit_config,
    fuzz_model_folders,
    header_of,
    tiny_folder,
    write_header,
)

from polymnesia.cli.main import main
from polymnesia.errors import PolymnesiaError

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
QUICK = str(CONFIGS / "quickstart.yaml")


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer Llama with a 300-row embedding and its own 300-token BPE."""
    return tiny_folder(tmp_path_factory.mktemp("model") / "llama")


@pytest.fixture
def folder(pristine: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(pristine, tmp_path / "llama"))


def validate(*overrides: str) -> list[str]:
    return ["validate", QUICK, *(x for o in overrides for x in ("--set", o))]


def dry_run(tmp_path: Path, *overrides: str) -> list[str]:
    return ["run", QUICK, *overrides, "--dry-run", "--run-dir", str(tmp_path / "run")]


def both(capsys: pytest.CaptureFixture[str], tmp_path: Path, *overrides: str) -> str:
    """``validate`` and ``run --dry-run`` refuse the overrides with the same one line."""
    first = refused(capsys, validate(*overrides))
    assert refused(capsys, dry_run(tmp_path, *overrides)) == first
    return first


def test_an_intact_folder_is_accepted(folder: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(validate(f"model.name_or_path={folder}")) == 0, capsys.readouterr().err
    assert main(dry_run(tmp_path, f"model.name_or_path={folder}")) == 0


# -- 2. config.json sizes ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("hidden_size", 2**40),
        ("vocab_size", 2**40),
        ("num_hidden_layers", -1),
        ("intermediate_size", -(2**40)),
        ("num_attention_heads", 0),
        ("hidden_size", 16.5),
        ("hidden_size", "16"),
        ("num_hidden_layers", True),
        ("num_hidden_layers", 2000),  # below 2**24, above the layer bound
    ],
)
def test_config_sizes_out_of_range_are_refused(  # type: ignore[no-untyped-def]
    folder: Path, tmp_path: Path, capsys, key: str, value: object
) -> None:
    edit_config(folder, **{key: value})
    err = both(capsys, tmp_path, f"model.name_or_path={folder}")
    top = "1,024" if key == "num_hidden_layers" else "16,777,216"
    assert f"{key} is {json.dumps(value)}" in err and f"whole number from 1 to {top}" in err


def test_config_sizes_that_disagree_with_the_weights_are_refused(  # type: ignore[no-untyped-def]
    folder: Path, tmp_path: Path, capsys
) -> None:
    edit_config(folder, vocab_size=900)
    err = both(capsys, tmp_path, f"model.name_or_path={folder}")
    assert "(900, 16), but the weights hold (300, 16)" in err and "disagree" in err
    edit_config(folder, vocab_size=300, num_hidden_layers=3)
    err = both(capsys, tmp_path, f"model.name_or_path={folder}")
    assert "num_hidden_layers: 3 (3 blocks of model.layers), but the weights hold 2" in err


def test_a_config_that_is_not_a_json_object_is_refused(
    folder: Path, tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    (folder / "config.json").write_bytes(b"\xff\xfe{}")
    assert "config.json is not UTF-8" in both(capsys, tmp_path, f"model.name_or_path={folder}")
    (folder / "config.json").write_text("[1]")
    assert "holds list, not an object" in both(capsys, tmp_path, f"model.name_or_path={folder}")


# -- 2. safetensors headers --------------------------------------------------------------


def test_a_header_length_field_of_2_to_the_60_is_refused(
    folder: Path, tmp_path: Path, capsys
) -> None:  # type: ignore[no-untyped-def]
    weights = folder / "model.safetensors"
    header, data = header_of(weights)
    write_header(weights, header, data, length=2**60)
    err = both(capsys, tmp_path, f"model.name_or_path={folder}")
    assert "header length field says 1,152,921,504,606,846,976 bytes" in err
    assert "more than the file holds" in err


def test_a_tensor_larger_than_the_file_is_refused(folder: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    weights = folder / "model.safetensors"
    header, data = header_of(weights)
    header["model.norm.weight"]["data_offsets"][1] += 10**9
    write_header(weights, header, data)
    err = both(capsys, tmp_path, f"model.name_or_path={folder}")
    assert "tensor 'model.norm.weight' claims bytes" in err and "the file holds" in err


def test_a_tensor_whose_bytes_are_not_dtype_times_shape_is_refused(  # type: ignore[no-untyped-def]
    folder: Path, tmp_path: Path, capsys
) -> None:
    weights = folder / "model.safetensors"
    header, data = header_of(weights)
    header["model.norm.weight"]["shape"] = [32]
    write_header(weights, header, data)
    err = both(capsys, tmp_path, f"model.name_or_path={folder}")
    assert "has 64 bytes, but F32 x (32,) takes 128" in err


def test_missing_weights_and_shards_outside_the_folder_are_refused(  # type: ignore[no-untyped-def]
    folder: Path, tmp_path: Path, capsys
) -> None:
    header, _ = header_of(folder / "model.safetensors")
    (folder / "model.safetensors").rename(folder / "shard.safetensors")
    err = both(capsys, tmp_path, f"model.name_or_path={folder}")
    assert "holds no model.safetensors" in err and "safetensors weights only" in err
    weight_map = {k: "shard.safetensors" for k in header if k != "__metadata__"}
    index = folder / "model.safetensors.index.json"
    index.write_text(json.dumps({"weight_map": weight_map}))
    assert main(validate(f"model.name_or_path={folder}")) == 0  # a sharded folder is fine
    weight_map["model.norm.weight"] = "../../etc/passwd"
    index.write_text(json.dumps({"weight_map": weight_map}))
    err = both(capsys, tmp_path, f"model.name_or_path={folder}")
    assert "names shard '../../etc/passwd'; a shard is a file name in the model folder" in err


def test_read_header_accepts_what_safetensors_writes(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import save_file

    from polymnesia.models.safetensors_headers import read_header

    tensors = {
        "a": torch.zeros(3, 5, dtype=torch.bfloat16),
        "b": torch.ones(7, dtype=torch.int64),
        "c": torch.zeros(2, 2, dtype=torch.bool),
        "d": torch.zeros(0, 4),
        "e": torch.tensor(1.0, dtype=torch.float16),
    }
    save_file(tensors, tmp_path / "t.safetensors", metadata={"format": "pt"})
    read = read_header(tmp_path / "t.safetensors")
    assert {k: (v.dtype, v.shape) for k, v in read.items()} == {
        "a": ("BF16", (3, 5)),
        "b": ("I64", (7,)),
        "c": ("BOOL", (2, 2)),
        "d": ("F32", (0, 4)),
        "e": ("F16", ()),
    }
    # the same bytes with a gap between two tensors: refused as the safetensors library does
    header, data = header_of(tmp_path / "t.safetensors")
    first = min(
        (k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0]
    )
    header[first]["data_offsets"] = [0, header[first]["data_offsets"][1] - 1]
    write_header(tmp_path / "t.safetensors", header, data)
    with pytest.raises(PolymnesiaError, match="starts at byte|has .* bytes, but"):
        read_header(tmp_path / "t.safetensors")


@pytest.mark.parametrize(
    "arch", ["mistral", "llama", "qwen2", "gemma", "gemma2", "gpt2", "xlm-roberta"]
)
def test_every_tiny_architecture_reads_as_a_model(arch: str, tmp_path: Path) -> None:
    """No false refusal: tied heads (GPT-2, Gemma), encoders, every architecture of the
    architecture matrix."""
    from polymnesia.models.folders import check_model_folder
    from polymnesia.testing import save_tiny, tiny_bpe

    tok = tiny_bpe(vocab_size=300)
    folder = save_tiny(tmp_path / arch, arch, tok, num_hidden_layers=2)
    info = check_model_folder(folder, trust_remote_code=False, key="model.name_or_path")
    assert info.embedding_rows == len(tok)
    assert info.tensors


def test_damaged_weights_give_one_line_when_loaded_too(folder: Path) -> None:
    """The stage's loader (a Hub model is only read when it runs): one line, not transformers'
    traceback."""
    from polymnesia.models.build import load_model

    weights = folder / "model.safetensors"
    header, data = header_of(weights)
    write_header(weights, header, data, length=2**60)
    with pytest.raises(PolymnesiaError, match="safetensors weights are damaged"):
        load_model(folder)


# -- 2. auto_map -------------------------------------------------------------------------


def test_an_auto_map_is_refused_without_trust_and_its_code_never_runs(  # type: ignore[no-untyped-def]
    folder: Path, tmp_path: Path, capsys
) -> None:
    (folder / "modeling_evil.py").write_text(MARKER_CODE)
    (folder / "configuration_evil.py").write_text(MARKER_CODE)
    auto_map = {"AutoConfig": "configuration_evil.C", "AutoModelForCausalLM": "modeling_evil.M"}
    edit_config(folder, model_type="evil", auto_map=auto_map)
    err = both(capsys, tmp_path, f"model.name_or_path={folder}")
    assert 'has an auto_map (AutoConfig -> "configuration_evil.C")' in err
    assert "model.trust_remote_code: true and pass --trust-remote-code" in err
    # asked for in the config but not on the command line: the run names the flag
    err = refused(
        capsys, dry_run(tmp_path, f"model.name_or_path={folder}", "model.trust_remote_code=true")
    )
    assert "add --trust-remote-code" in err
    assert not (folder / "RAN").exists()


def test_an_auto_map_on_a_known_model_type_says_it_can_be_removed(  # type: ignore[no-untyped-def]
    folder: Path, tmp_path: Path, capsys
) -> None:
    edit_config(folder, auto_map={"AutoModelForCausalLM": "modeling_evil.M"})
    err = both(capsys, tmp_path, f"model.name_or_path={folder}")
    assert "remove auto_map to load the folder as transformers' own llama" in err


# -- 5. a loaded model keeps its own tokenizer ---------------------------------------------


def test_a_loaded_model_takes_its_own_tokenizer(folder: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The issue's case: no tokenizer.name_or_path. The tokenizer stage now loads the model's
    own (it trained a fresh BPE of tokenizer.vocab_size before); the dry run shows it."""
    from polymnesia.experiments.preflight import check_config

    _, specs = check_config(QUICK, [f"model.name_or_path={folder}", "tokenizer.vocab_size=500"])
    (tok,) = [s for s in specs if s.kind == "train_tokenizer"]
    assert tok.params.tokenizer.name_or_path == str(folder)
    assert main(dry_run(tmp_path, f"model.name_or_path={folder}")) == 0
    assert f"name_or_path: {folder}" in capsys.readouterr().out.split("model:")[0]
    # and a preset keeps its trained tokenizer (shipped configs keep their fingerprints)
    _, specs = check_config(QUICK, [])
    (tok,) = [s for s in specs if s.kind == "train_tokenizer"]
    assert tok.params.tokenizer.name_or_path is None


def test_a_folder_without_a_tokenizer_needs_one_named(folder: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).unlink()
    err = both(capsys, tmp_path, f"model.name_or_path={folder}")
    assert f"model.name_or_path {folder} has no tokenizer of its own" in err
    assert "set tokenizer.name_or_path" in err


def test_another_tokenizer_is_refused_naming_both(folder: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from polymnesia.testing import tiny_bpe
    from polymnesia.tokenizers.bpe import save_tokenizer

    other = tmp_path / "other"
    save_tokenizer(tiny_bpe(vocab_size=280), other)
    err = both(capsys, tmp_path, f"model.name_or_path={folder}", f"tokenizer.name_or_path={other}")
    assert (
        f"tokenizer.name_or_path {other} is not the tokenizer of model.name_or_path {folder}" in err
    )
    assert "remove tokenizer.name_or_path" in err
    # a copy of the model's own tokenizer elsewhere is its own
    copy = tmp_path / "copy"
    copy.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(folder / name, copy / name)
    assert main(validate(f"model.name_or_path={folder}", f"tokenizer.name_or_path={copy}")) == 0


def test_a_tokenizer_whose_ids_do_not_fit_the_embeddings_is_refused(  # type: ignore[no-untyped-def]
    folder: Path, tmp_path: Path, capsys
) -> None:
    from polymnesia.testing import tiny_bpe
    from polymnesia.tokenizers.bpe import save_tokenizer

    for name in ("tokenizer.json", "tokenizer_config.json"):
        (folder / name).unlink()
    larger = tmp_path / "larger"
    save_tokenizer(tiny_bpe(vocab_size=400), larger)
    err = both(capsys, tmp_path, f"model.name_or_path={folder}", f"tokenizer.name_or_path={larger}")
    assert f"has ids up to 399, but model.name_or_path {folder} has 300 embedding rows" in err


def test_the_stages_refuse_a_tokenizer_that_does_not_fit_a_loaded_model(folder: Path) -> None:
    """A Hub model is only known when its stage loads it: the loader checks the pairing."""
    from polymnesia.models import ModelConfig
    from polymnesia.models.build import build_model
    from polymnesia.testing import tiny_bpe

    with pytest.raises(PolymnesiaError, match="has ids up to 399, but model .* has 300 embedding"):
        build_model(ModelConfig(name_or_path=str(folder)), tiny_bpe(vocab_size=400))
    model = build_model(ModelConfig(name_or_path=str(folder)), tiny_bpe(vocab_size=300))
    assert model.get_input_embeddings().num_embeddings == 300


def test_vocabulary_expansion_still_pairs_a_loaded_model_with_its_expanded_tokenizer(  # type: ignore[no-untyped-def]
    folder: Path, capsys
) -> None:
    """Aggarwal et al. 2024's protocol on a loaded model: its own tokenizer for the base stages, the
    expanded one made by adapt_vocabulary (not a pair these checks refuse)."""
    from polymnesia.experiments.preflight import check_config

    config = str(CONFIGS / "active_forgetting_smoke.yaml")
    _, specs = check_config(config, [f"model.name_or_path={folder}"])
    assert {s.kind for s in specs} >= {"adapt_vocabulary", "pretrain"}
    (tok,) = [s for s in specs if s.kind == "train_tokenizer"]
    assert tok.params.tokenizer.name_or_path == str(folder)
    assert main(["validate", str(CONFIGS / "new_token_init_smoke.yaml")]) == 0, capsys.readouterr()


# -- the fuzz class ------------------------------------------------------------------------


def test_hostile_model_folders_are_refused_in_one_line(isolated_cache, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    outcomes = fuzz_model_folders(tmp_path, seed=0)
    assert len(outcomes) >= 90
    bad = [o for o in outcomes if o.result != "refused"]
    assert not bad, "\n".join(
        f"{o.mutation.command} {o.mutation.path}: {o.result} {o.detail}" for o in bad
    )


def test_a_folder_under_the_home_directory_loads_as_it_validates(  # type: ignore[no-untyped-def]
    folder: Path, monkeypatch, capsys
) -> None:
    """``~/model`` passed validation (the model section expands ``~``) but the loader took it
    for a Hub id."""
    from polymnesia.models import ModelConfig
    from polymnesia.models.build import build_model

    monkeypatch.setenv("HOME", str(folder.parent))
    home = f"~/{folder.name}"
    assert main(validate(f"model.name_or_path={home}")) == 0, capsys.readouterr().err
    model = build_model(ModelConfig(name_or_path=home), None)
    assert model.get_input_embeddings().num_embeddings == 300


def test_plan_reads_a_folder_as_validate_does(folder: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """``polymnesia plan`` sized a 2**40-wide model from config.json (2 billion M parameters)
    and asked on the terminal whether to run an auto_map's code."""
    edit_config(folder, hidden_size=2**40)
    err = refused(capsys, ["plan", QUICK, f"model.name_or_path={folder}"])
    assert "hidden_size is 1099511627776" in err
    edit_config(folder, hidden_size=16, model_type="evil", auto_map={"AutoConfig": "c.C"})
    assert "has an auto_map" in refused(capsys, ["plan", QUICK, f"model.name_or_path={folder}"])
